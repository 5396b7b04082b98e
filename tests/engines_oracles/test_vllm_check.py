"""The vLLM oracle answers with vLLM 0.32's own resolution of a server argv (no server started).

What these pin down is vLLM's behaviour the sweeper's vLLM engine relies on: which speculative
methods and keys exist, which values vLLM fills in or refuses, and what its system_fingerprint
does and does not cover. One oracle call (~30 s, mostly importing vLLM) serves the module;
without vLLM's venv the tests skip (fail under SWEEPER_REQUIRE_VLLM=1).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddtree_runtime.export import export_model
from tests.engines_oracles.vllm_oracle import require_vllm, run_vllm_oracle

# Runs the engine's own code in its venv (tens of seconds to import): not in make test-quick.
pytestmark = pytest.mark.slow


def ngram(k: int, **lookup: int) -> str:
    return json.dumps({"method": "ngram", "num_speculative_tokens": k, **lookup})


@pytest.fixture(scope="module")
def answer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_vllm()  # skip (or fail in CI) before exporting anything
    model = str(export_model("tiny-random", tmp_path_factory.mktemp("m") / "tiny"))
    base = ["--model", model, "--enforce-eager", "--dtype", "float32"]
    base += ["--kv-cache-memory-bytes", "1G"]
    spec = "--speculative-config"
    cases = {
        "ar": base,
        "ngram4": [*base, spec, ngram(4, prompt_lookup_max=4, prompt_lookup_min=2)],
        "ngram2": [*base, spec, ngram(2, prompt_lookup_max=4, prompt_lookup_min=2)],
        "ngram_defaults": [*base, spec, ngram(4)],
        "ngram_max_only": [*base, spec, ngram(4, prompt_lookup_max=3)],
        "ngram_topk": [*base, spec, ngram(4, prompt_lookup_max=4, topk=4)],
        "ddtree": [*base, spec, json.dumps({"method": "ddtree", "num_speculative_tokens": 8})],
        "bad_flag": [*base, "--no-such-flag"],
        "env_kv": ["--model", model],
    }
    env = {"env_kv": {"VLLM_CPU_KVCACHE_SPACE": "2"}}
    result = run_vllm_oracle([{"name": n, "argv": a, "env": env.get(n)} for n, a in cases.items()])
    result["by_name"] = {r["name"]: r for r in result["results"]}
    return result


def test_vllm_032_speaks_ngram_eagle3_dflash_but_not_ddtree(answer: dict[str, Any]) -> None:
    assert answer["vllm_version"] == "0.32.0"
    methods = set(answer["speculative_methods"])
    assert {"ngram", "eagle3", "dflash", "draft_model", "suffix"} <= methods
    assert "ddtree" not in methods  # vllm-project/vllm PR #42910 is not in 0.32
    fields = set(answer["speculative_fields"])
    assert {"num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "model"} <= fields
    assert "topk" not in fields


def test_an_ngram_request_resolves_exactly_as_asked(answer: dict[str, Any]) -> None:
    got = answer["by_name"]["ngram4"]
    assert got["ok"], got["error"]
    resolved = got["resolved"]
    assert resolved["dtype"] == "float32" and resolved["enforce_eager"] is True
    assert resolved["kv_cache_memory_bytes"] == 1 << 30
    spec = resolved["speculative"]
    assert (spec["method"], spec["num_speculative_tokens"]) == ("ngram", 4)
    assert (spec["prompt_lookup_max"], spec["prompt_lookup_min"]) == (4, 2)
    assert answer["by_name"]["ar"]["resolved"]["speculative"] is None


def test_vllm_fills_in_ngram_lookup_values_that_were_not_given(answer: dict[str, Any]) -> None:
    defaults = answer["by_name"]["ngram_defaults"]["resolved"]["speculative"]
    assert (defaults["prompt_lookup_min"], defaults["prompt_lookup_max"]) == (5, 5)
    max_only = answer["by_name"]["ngram_max_only"]["resolved"]["speculative"]
    assert (max_only["prompt_lookup_min"], max_only["prompt_lookup_max"]) == (3, 3)


def test_vllm_refuses_unknown_keys_methods_and_flags(answer: dict[str, Any]) -> None:
    topk = answer["by_name"]["ngram_topk"]
    assert not topk["ok"] and topk["stage"] == "config"
    assert "topk" in topk["error"] and "Unexpected keyword argument" in topk["error"]
    ddtree = answer["by_name"]["ddtree"]
    assert not ddtree["ok"] and "'ngram'" in ddtree["error"] and "method" in ddtree["error"]
    flag = answer["by_name"]["bad_flag"]
    assert (flag["ok"], flag["stage"]) == (False, "parse")
    assert "unrecognized arguments: --no-such-flag" in flag["error"]


def test_environment_of_a_case_reaches_vllm(answer: dict[str, Any]) -> None:
    resolved = answer["by_name"]["env_kv"]["resolved"]
    assert resolved["kv_cache_memory_bytes"] == 2 << 30  # VLLM_CPU_KVCACHE_SPACE=2 (GiB)
    assert resolved["dtype"] == "bfloat16"  # vLLM's CPU default, though config.json says float32


def test_system_fingerprint_tells_speculation_apart_but_not_its_size(
    answer: dict[str, Any],
) -> None:
    prints = {n: answer["by_name"][n]["system_fingerprint"] for n in ("ar", "ngram4", "ngram2")}
    assert all(re.fullmatch(r"vllm-0\.32\.0-[0-9a-f]{8}", p) for p in prints.values()), prints
    assert prints["ar"] != prints["ngram4"]
    # compute_hash() covers the compute graph only: num_speculative_tokens is not in it, so a
    # running server's k must be proven another way (/metrics per-position counters).
    assert prints["ngram4"] == prints["ngram2"]


def test_the_oracle_reads_a_directory_export_wrote(answer: dict[str, Any]) -> None:
    model = Path(answer["by_name"]["ar"]["resolved"]["model"])
    assert (model / "config.json").is_file() and answer["by_name"]["ar"]["ok"]
