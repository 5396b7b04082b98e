"""n > 1 on the wire and back: the measure client reads every choice of a real multi-choice
stream (the bundled runtime serving tiny-random on loopback, choices streamed by `index`), each
choice's ids, text and finish reason as the server's own non-streamed answer gives them; the
request's timing once, its output tokens summed over the choices."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ddtree_runtime.server.local_server import LocalServer
from sweeper.engines.base import RequestSpec
from sweeper.engines.registry import engine_for
from sweeper.measure.client import stream_request, token_sha256
from sweeper.measure.sse_http import StreamClient
from sweeper.spec import RuntimeSpec

pytestmark = pytest.mark.slow
MODEL = "tiny-random"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(["--model", MODEL, "--max-model-len", "256"]) as running:
        yield running


def _stream(server: LocalServer, spec: RequestSpec) -> dict[str, Any]:
    engine = engine_for(RuntimeSpec(model=MODEL))

    async def send() -> dict[str, Any]:
        async with StreamClient(timeout_s=120) as client:
            return await stream_request(client, server.url, spec, engine, model=MODEL)

    return asyncio.run(send())


def test_every_choice_of_a_streamed_response_is_read(server: LocalServer) -> None:
    spec = RequestSpec(
        prompt_id="a", prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=5, n=3
    )
    record = _stream(server, spec)
    body = {"model": MODEL, "prompt": spec.prompt, "max_tokens": 8, "temperature": 0.9}
    body.update(seed=5, n=3, return_token_ids=True)
    answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60).json()
    expected = [(c["token_ids"], c["text"], c["finish_reason"]) for c in answer["choices"]]
    assert record["error"] is None
    choices = record["choices"]
    assert [(c["token_ids"], c["text"], c["finish_reason"]) for c in choices] == expected
    assert len({tuple(c["token_ids"]) for c in choices}) == 3  # three independent draws
    assert [c["sha256"] for c in choices] == [token_sha256(ids) for ids, _, _ in expected]
    assert [c["output_tokens"] for c in choices] == [len(ids) for ids, _, _ in expected]
    # Per request: one TTFT, the output tokens of every choice.
    assert record["ttft"] is not None and record["ttft"] > 0
    assert record["output_tokens"] == sum(len(ids) for ids, _, _ in expected)
    assert record["output_tokens"] == answer["usage"]["completion_tokens"]
