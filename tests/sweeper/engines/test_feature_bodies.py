"""The request features on the wire (issue 47): a request config's features reach the
RequestSpec the workload builds, and each engine's body carries them where its feature-table
row says: the bundled runtime every one (SGLang's top-level `regex`), an OpenAI endpoint OpenAI's
documented ones; logprobs asked by the workload reach a speculative server too, beside (never
instead of) the margins an AR server is asked for; nothing is ever silently left out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweeper.config import RequestConfig
from sweeper.engines.base import Capabilities, RequestSpec
from sweeper.engines.common import openai_body
from sweeper.engines.registry import engine_for
from sweeper.engines.sglang_stream import generate_body
from sweeper.measure.workload import expand_requests
from sweeper.spec import RuntimeSpec
from sweeper.spec.workload import PromptSpec

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
EVERY = {
    "min_p": 0.1,
    "repetition_penalty": 1.3,
    "frequency_penalty": 0.5,
    "presence_penalty": -0.5,
    "logit_bias": {50256: -100, 13: 2.5},
    "stop": ["\n\n", "END"],
    "response_format": FORMAT,
    "regex": None,
    "n": 1,
    "logprobs": 5,
}
RC = RequestConfig.make(0.7, 8, 1, seed=3, features=EVERY)
#: What every body carries for EVERY (logprobs aside: they depend on the API and margins).
WIRE = {
    "min_p": 0.1,
    "repetition_penalty": 1.3,
    "frequency_penalty": 0.5,
    "presence_penalty": -0.5,
    "logit_bias": {"13": 2.5, "50256": -100.0},
    "stop": ["\n\n", "END"],
    "response_format": FORMAT,
    "n": 1,
}
SPECULATIVE = Capabilities(token_ids="openai", acceptance="none", margins="none")


def _spec(chat: bool) -> RequestSpec:
    (request,) = expand_requests([PromptSpec(id="a", text="hi")], RC, repeats=1, chat=chat)
    return request


@pytest.mark.parametrize("chat", [True, False])
def test_the_runtime_engine_sends_every_feature_and_the_logprobs_asked(chat: bool) -> None:
    request = _spec(chat)
    assert request.feature_values() == RC.feature_values()
    engine = engine_for(RuntimeSpec())
    for bound in (engine, engine.bind(SPECULATIVE)):
        body = bound.request(request, "m").body
        assert {k: body[k] for k in WIRE} == WIRE
        # Sampled: no margins asked, so the logprobs are the workload's, on every server.
        logprobs = {k: body[k] for k in ("logprobs", "top_logprobs") if k in body}
        assert logprobs == ({"logprobs": True, "top_logprobs": 5} if chat else {"logprobs": 5})
    regex = replace(request, response_format=None, regex="[0-9]+")
    assert engine.request(regex, "m").body["regex"] == "[0-9]+"


def test_logprobs_asked_merge_with_the_margins_and_reach_a_speculative_server() -> None:
    greedy = replace(_spec(True), temperature=0.0, logprobs=1)
    ar = openai_body(greedy, None, engine="ddtree_runtime")
    assert (ar["logprobs"], ar["top_logprobs"]) == (True, 2)  # the margins need two
    speculative = openai_body(greedy, None, margins=False, engine="ddtree_runtime")
    assert (speculative["logprobs"], speculative["top_logprobs"]) == (True, 1)
    none_asked = openai_body(
        replace(greedy, logprobs=None), None, margins=False, engine="ddtree_runtime"
    )
    assert "logprobs" not in none_asked and "top_logprobs" not in none_asked
    completions = openai_body(
        replace(greedy, chat=False, logprobs=0), None, margins=False, engine="ddtree_runtime"
    )
    assert completions["logprobs"] == 0


def test_an_openai_endpoint_gets_openais_fields_and_never_one_it_lacks() -> None:
    openai = engine_for(RuntimeSpec(engine="openai", base_url="http://127.0.0.1:1"))
    documented = replace(_spec(True), min_p=None, repetition_penalty=None)
    body = openai.request(documented, "m").body
    assert body["logit_bias"] == WIRE["logit_bias"] and body["response_format"] == FORMAT
    with pytest.raises(LookupError, match="openai takes no min_p"):
        openai.request(_spec(True), "m")


def test_sglang_native_body_never_drops_a_feature_silently() -> None:
    with pytest.raises(LookupError, match="writes no min_p, repetition_penalty"):
        generate_body(_spec(False), [1, 2], margins=False)
    plain = RequestSpec(prompt_id="a", prompt="hi", max_tokens=8, temperature=0.0)
    assert "sampling_params" in generate_body(plain, [1, 2], margins=False)
