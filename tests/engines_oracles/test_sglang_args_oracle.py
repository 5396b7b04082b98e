"""SGLang 0.5.23's own parser and resolver, through sglang_args_oracle.py.

These pin the facts the sglang engine module is built on (what DFLASH forces, what
num_draft_tokens means, what /server_info reports) to SGLang's code rather than to our reading
of it. All cases run in one oracle process (one SGLang import, ~10 s).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines_oracles.oracle_process import sglang_resolve

# Runs the engine's own code in its venv (tens of seconds to import): not in make test-quick.
pytestmark = pytest.mark.slow


def _argv(flags: str) -> list[str]:
    """An argv list written as one string (no value here contains a space)."""
    return flags.split()


BASE = _argv("--model-path {target} --device cuda")
DFLASH = BASE + _argv("--speculative-algorithm DFLASH --speculative-draft-model-path {draft}")
CASES = {
    "dflash_grid": DFLASH
    + _argv(
        "--speculative-num-draft-tokens 16 --speculative-eagle-topk 4 --speculative-num-steps 8"
    ),
    "dflash_block_only": DFLASH + _argv("--speculative-num-draft-tokens 8"),
    "dflash_from_draft_config": DFLASH,
    "dflash_block_size_flag": DFLASH + _argv("--speculative-dflash-block-size 12"),
    "dflash_block_conflict": DFLASH
    + _argv("--speculative-dflash-block-size 12 --speculative-num-draft-tokens 16"),
    "dflash_on_cpu": _argv(
        "--model-path {target} --device cpu --speculative-algorithm DFLASH "
        "--speculative-draft-model-path {draft}"
    ),
    "graphs_default": BASE,
    "graphs_off_deprecated": BASE + _argv("--disable-cuda-graph"),
    "graphs_off": BASE
    + _argv("--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled"),
    "ddtree": BASE + _argv("--speculative-algorithm DDTREE"),
    "unknown_flag": BASE + _argv("--speculative-ddtree-budget 7"),
    "ar_b300_like": BASE
    + _argv(
        "--tp-size 8 --trust-remote-code --mem-fraction-static 0.85 --attention-backend fa3 "
        "--context-length 32768 --dtype bfloat16 --disable-cuda-graph --max-running-requests 32"
    ),
}


@pytest.fixture(scope="module")
def resolved() -> dict[str, dict[str, Any]]:
    answers = sglang_resolve([{"name": name, "argv": argv} for name, argv in CASES.items()])
    return {answer["name"]: answer for answer in answers}


def test_dflash_overrides_topk_and_steps_with_only_a_warning(resolved: dict) -> None:
    case = resolved["dflash_grid"]
    assert case["ok"], case["error"]
    assert case["overridden"] == {
        "speculative_eagle_topk": {"requested": 4, "resolved": 1},
        "speculative_num_steps": {"requested": 8, "resolved": 1},
    }
    assert case["resolved"]["speculative_num_draft_tokens"] == 16
    assert any("overriding speculative_eagle_topk=4 to 1" in w for w in case["warnings"])


def test_dflash_num_draft_tokens_is_the_block_size(resolved: dict) -> None:
    only = resolved["dflash_block_only"]["resolved"]
    assert (only["speculative_num_draft_tokens"], only["speculative_eagle_topk"]) == (8, 1)
    assert only["speculative_num_steps"] == 1
    # Unset, it is the draft checkpoint's block_size (the tiny draft says 16).
    inferred = resolved["dflash_from_draft_config"]["resolved"]
    assert inferred["speculative_num_draft_tokens"] == 16
    # --speculative-dflash-block-size is another spelling that sets num_draft_tokens...
    spelled = resolved["dflash_block_size_flag"]["resolved"]
    assert spelled["speculative_num_draft_tokens"] == 12
    # ...and the two must agree.
    conflict = resolved["dflash_block_conflict"]
    assert not conflict["ok"] and "they differ" in conflict["error"]


def test_dflash_caps_max_running_requests_unless_given(resolved: dict) -> None:
    assert resolved["dflash_grid"]["resolved"]["max_running_requests"] == 48
    assert resolved["ar_b300_like"]["resolved"]["max_running_requests"] == 32


def test_dflash_needs_a_gpu_device(resolved: dict) -> None:
    case = resolved["dflash_on_cpu"]
    assert not case["ok"] and "not supported" in case["error"]


def test_stock_sglang_has_no_ddtree(resolved: dict) -> None:
    ddtree = resolved["ddtree"]
    assert not ddtree["ok"] and "DDTREE" in ddtree["error"]
    unknown = resolved["unknown_flag"]
    assert unknown["error_type"] == "ArgumentError"
    assert "--speculative-ddtree-budget" in unknown["error"]


def test_plain_flags_resolve_as_given(resolved: dict) -> None:
    case = resolved["ar_b300_like"]
    assert case["ok"], case["error"]
    assert case["overridden"] == {} and case["not_fields"] == []
    assert case["requested"]["disable_cuda_graph"] is True
    assert case["resolved"]["speculative_algorithm"] is None


def test_server_info_reports_resolved_values_with_their_types(resolved: dict) -> None:
    info = resolved["dflash_grid"]["server_info"]
    # The resolution result, not the request: a grid label of topk 4 reads back as 1.
    assert info["speculative_eagle_topk"] == 1 and info["speculative_num_steps"] == 1
    assert info["speculative_num_draft_tokens"] == 16
    assert info["speculative_algorithm"] == "DFLASH"
    ar = resolved["ar_b300_like"]["server_info"]
    assert (ar["tp_size"], ar["mem_fraction_static"], ar["disable_cuda_graph"]) == (8, 0.85, True)
    assert ar["context_length"] == 32768 and ar["dtype"] == "bfloat16"
    # And what was asked for, verbatim (paths are the oracle's local checkpoints).
    assert ar["launch_command"].endswith("--disable-cuda-graph --max-running-requests 32")


def test_cuda_graph_off_shows_in_the_resolved_cuda_graph_config(resolved: dict) -> None:
    def decode_backend(name: str) -> str:
        return resolved[name]["resolved"]["cuda_graph_config"]["decode"]["backend"]

    assert decode_backend("graphs_default") == "full"
    assert decode_backend("graphs_off") == decode_backend("graphs_off_deprecated") == "disabled"
    # --disable-cuda-graph still works in 0.5.23, with a deprecation warning.
    deprecated = resolved["graphs_off_deprecated"]["warnings"]
    assert any("'--disable-cuda-graph' is deprecated" in w for w in deprecated)
    assert resolved["graphs_off"]["warnings"] == []
