"""Switching in place, as the engines declare it: the runtime's switchable fields are its
catalog record's and its own server's (`ddtree_runtime.server.config.SWITCHABLE`), each with the
value a start without the flag runs with, so a switch's body leaves nothing of the config
before; vLLM and an endpoint switch nothing; the spec refuses an accept threshold outside the
range the runtime refuses, in the runtime's words."""

from __future__ import annotations

import httpx
import pytest

from ddtree_runtime.knobs import accept_threshold_problem
from ddtree_runtime.server.config import SWITCHABLE, ServeConfig
from sweeper.catalog.records import RECORDS
from sweeper.config.knobs import flag_problem
from sweeper.engines.base import EngineError
from sweeper.engines.ddtree_runtime import DDTreeRuntime
from sweeper.engines.registry import engine_for
from sweeper.plan import build_plan
from sweeper.spec import parse_spec

WORKLOAD = "workload:\n  prompts: [{id: a, text: hi}]\n"
RUNTIME_FIELDS = {
    "speculative",
    "draft",
    "budget",
    "topk",
    "block_size",
    "cuda_graph",
    "accept_threshold",
}


def test_the_runtime_declares_its_own_switch_fields_with_their_start_values() -> None:
    command = RECORDS["ddtree_runtime"].command
    assert command is not None
    assert set(command.switchable) == set(SWITCHABLE) == RUNTIME_FIELDS
    defaults = ServeConfig()
    assert {k: getattr(defaults, k) for k in SWITCHABLE} == dict(command.switchable)


@pytest.mark.parametrize("value", [0.0, -0.5, 1.0000001, 2, True, "0.5", 0.2, 1.0, 1])
def test_the_accept_threshold_range_is_the_runtimes_word_for_word(value: object) -> None:
    assert flag_problem("accept_threshold", value) == accept_threshold_problem(value)


def test_a_switch_body_sets_every_field_so_nothing_of_the_config_before_stays() -> None:
    spec = parse_spec(
        "name: t\ngrid: {budget: [8], topk: [2], accept_threshold: [0.5]}\n" + WORKLOAD
    )
    engine = engine_for(spec.runtime, "src")
    assert isinstance(engine, DDTreeRuntime)
    assert engine.switchable(None) == frozenset(RUNTIME_FIELDS)
    ar, speculative = (step.server_config for step in build_plan(spec).hosts[0].steps)
    assert engine.switch_body(speculative) == {
        "speculative": "ddtree",
        "draft": "ngram",
        "budget": 8,
        "topk": 2,
        "block_size": 8,
        "cuda_graph": False,
        "accept_threshold": 0.5,
    }
    # AR: the tree knobs and the threshold as a fresh AR start has them.
    assert engine.switch_body(ar) == {
        "speculative": "none",
        "draft": "ngram",
        "budget": 16,
        "topk": 4,
        "block_size": 8,
        "cuda_graph": False,
        "accept_threshold": 1.0,
    }


@pytest.mark.parametrize("runtime", ["{engine: vllm}", "{engine: openai, base_url: 'http://x:1'}"])
def test_vllm_and_an_endpoint_switch_nothing(runtime: str) -> None:
    spec = parse_spec(f"name: t\nruntime: {runtime}\n" + WORKLOAD)
    engine = engine_for(spec.runtime, None)
    assert engine.switchable(None) == frozenset()
    sc = build_plan(spec).hosts[0].steps[0].server_config
    with httpx.Client() as client, pytest.raises(EngineError, match="switches no server config"):
        engine.switch(client, "http://127.0.0.1:9", sc)
