"""The negotiation vocabulary shared by every engine: error bodies read whatever their shape,
a stream without ids never claims the engine's ids, and an engine with one way to ask (the
bundled runtime here, against its fake) picks what the server gives, never sends logprobs to a
speculative server, and fails with one line where no path gives ids."""

from __future__ import annotations

from contextlib import AbstractContextManager

import httpx
import pytest

from sweeper.config import ServerConfig
from sweeper.engines.base import RequestSpec
from sweeper.engines.capabilities import CapabilityError, error_message
from sweeper.engines.ddtree_runtime import DDTreeRuntime
from sweeper.engines.stream import ChunkReader
from sweeper.spec import RuntimeSpec
from tests.sweeper.conftest import fake_argv, serving


def test_error_bodies_of_every_shape() -> None:
    # SGLang's ErrorResponse (protocol.py: object, message, type, code at the top level).
    top = '{"object": "error", "message": "DDTREE refuses logprobs", "type": "Bad", "code": 400}'
    assert error_message(top) == "DDTREE refuses logprobs"
    assert error_message('{"error": {"message": "nested", "type": "x"}}') == "nested"
    assert error_message('{"error": "in a stream"}') == "in a stream"
    assert error_message('{"detail": "Not Found"}') == "Not Found"
    assert error_message("plain text") == "plain text"


def test_a_stream_of_text_without_ids_says_none() -> None:
    reader = ChunkReader(chat=False)
    reader.feed({"choices": [{"index": 0, "text": "hello"}]})
    reader.feed({"choices": [], "usage": {"completion_tokens": 1}})
    assert reader.fields()["token_ids_source"] == "none"
    assert reader.usage_mismatch() == "usage says 1 tokens, stream carried 0"


RUNTIME = RuntimeSpec.model_validate({"model": "fake"})
AR = ServerConfig.make("ar", {"cuda_graph": False})
SPEC = ServerConfig.make("speculative", {"budget": 4}, ("budget",))
PROBE = RequestSpec(prompt_id="p", prompt="hello there", max_tokens=4, temperature=0.0)


def fake(port: int, **env: str) -> AbstractContextManager[str]:
    return serving(fake_argv(port, "L1"), port, env)


def test_the_runtime_negotiates_its_own_paths(port: int) -> None:
    engine = DDTreeRuntime(RUNTIME, None)
    with fake(port) as url, httpx.Client() as client:
        ar = engine.negotiate(client, url, AR, PROBE, "fake")
        spec = engine.negotiate(client, url, SPEC, PROBE, "fake")
    assert (ar.token_ids, ar.acceptance, ar.margins) == ("openai", "not needed", "logprobs")
    assert (spec.token_ids, spec.acceptance, spec.margins) == ("openai", "requests", "baseline")
    assert "logprobs" not in engine.bind(spec).request(PROBE, "fake").body
    assert engine.bind(ar).request(PROBE, "fake").body["logprobs"] == 2


def test_a_server_without_ids_fails_with_one_line(port: int) -> None:
    engine = DDTreeRuntime(RUNTIME, None)
    with (
        fake(port, FAKE_PLAIN="1") as url,
        httpx.Client() as client,
        pytest.raises(CapabilityError) as err,
    ):
        engine.negotiate(client, url, AR, PROBE, "fake")
    assert str(err.value).startswith("this build gives no token ids:")
    assert "\n" not in str(err.value)
