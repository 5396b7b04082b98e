"""The shipped T = 0 workloads reach the processor faults with the drafter a user runs: on the
real smollm2 with n-gram drafts (no oracle), greedy, the planted `penalty_committed_only` (under
sweeps/local-penalties.yaml's frequency penalty) and `grammar_drafts_unmasked` (under
sweeps/local-json.yaml's schema) each change the greedy ids of a prompt of those workloads. A
fault on drafted nodes shows only where a drafted token is accepted and the processor moves that
node's argmax; these prompts are the ones whose answers copy, so the sweeps can catch them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ddtree_runtime.algo import mask
from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
from tests.ddtree_runtime.engine_helpers import smollm2

pytestmark = pytest.mark.slow  # the real model, three generations of three prompts

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


def workload(spec: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A shipped spec (parsed) and its dataset's prompts by id."""
    parsed = yaml.safe_load((SWEEPS / spec).read_text())
    rows = (SWEEPS / parsed["workload"]["datasets"][0]["file"]).read_text().splitlines()
    return parsed, {row["id"]: row["prompt"] for row in map(json.loads, rows)}


def chat_ids(text: str) -> list[int]:
    tokenizer = smollm2().tokenizer
    chat = [{"role": "user", "content": text}]
    prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(prompt, add_special_tokens=False))


def test_planted_faults_change_greedy_ids_with_ngram_drafts() -> None:
    penalties, copying = workload("local-penalties.yaml")
    schema, records = workload("local-json.yaml")
    frequency = next(v for v in penalties["grid"]["frequency_penalty"] if v)
    max_tokens = penalties["workload"]["max_tokens"]
    cases = [  # (prompt, request fields, the fault that must change its ids)
        (copying["colours"], {"frequency_penalty": frequency}, "penalty_committed_only"),
        (copying["banana"], {"frequency_penalty": frequency}, "penalty_committed_only"),
        (
            records["json-9"],
            {"response_format": schema["workload"]["response_format"]},
            "grammar_drafts_unmasked",
        ),
    ]
    m = smollm2()
    prompts = [chat_ids(text) for text, _, _ in cases]
    params = [SamplingParams(max_tokens=max_tokens, **fields) for _, fields, _ in cases]

    def run(fault: str | None) -> list[list[int]]:
        config = EngineConfig(budget=8, topk=4, block_size=8, max_batch=len(cases))
        if fault is not None:
            mask._FAULTS.add(fault)
        try:
            out = Engine(m, make_drafter("ngram", m), config).generate(prompts, params)
        finally:
            mask._FAULTS.discard(str(fault))
        return [r.token_ids for r in out]

    clean = run(None)
    for fault in ("penalty_committed_only", "grammar_drafts_unmasked"):
        faulty = run(fault)
        moved = [a != b for a, b in zip(clean, faulty, strict=True)]
        assert moved == [case_fault == fault for _, _, case_fault in cases], fault
