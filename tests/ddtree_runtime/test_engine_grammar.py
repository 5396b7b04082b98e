"""Structured output through the engine on the real smollm2: under a JSON schema and a regex,
DDTree emits AR's tokens greedy and sampled (same seeds), with drafts that are really accepted
(an oracle drafting AR's own output), every output valid; the planted fault that lets drafted
nodes choose without the mask breaks that."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddtree_runtime.algo import mask
from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, GenerationResult, SamplingParams
from tests.ddtree_runtime.engine_helpers import smollm2

pytestmark = pytest.mark.slow  # the real model, eight generations

DATA = Path(__file__).resolve().parents[2] / "sweeps" / "data"
SCHEMA = json.loads((DATA / "json_schema.json").read_text())
JSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "character", "schema": SCHEMA}}
DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
DATE_PROMPT = "On which date did the Apollo 11 crew land on the Moon? Answer as YYYY-MM-DD."
MAX_TOKENS = 40
TEMPERATURES = (0.0, 0.7)


def chat_ids(text: str) -> list[int]:
    tokenizer = smollm2().tokenizer
    chat = [{"role": "user", "content": text}]
    prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(prompt, add_special_tokens=False))


@functools.lru_cache(maxsize=1)
def prompts() -> list[list[int]]:
    """The JSON workload's first prompt (sweeps/data/json_prompts.jsonl) and a date question,
    each greedy and sampled: four requests in one batch."""
    line = (DATA / "json_prompts.jsonl").read_text().splitlines()[0]
    return [chat_ids(json.loads(line)["prompt"]), chat_ids(DATE_PROMPT)] * 2


def params() -> list[SamplingParams]:
    grammars: list[dict[str, Any]] = [{"response_format": JSON_FORMAT}, {"regex": DATE}]
    return [
        SamplingParams(max_tokens=MAX_TOKENS, temperature=temperature, seed=11, **grammar)
        for temperature in TEMPERATURES
        for grammar in grammars
    ]


@functools.lru_cache(maxsize=1)
def ar() -> tuple[GenerationResult, ...]:
    m = smollm2()
    engine = Engine(m, make_drafter("ngram", m), EngineConfig(speculative="none", max_batch=4))
    return tuple(engine.generate(prompts(), params()))


def ddtree(count: int = len(TEMPERATURES) * 2) -> list[GenerationResult]:
    """The first `count` requests through DDTree (b16 k4, block 8) drafting AR's own output
    with the oracle's noise: deep trees, some nodes accepted, some not."""
    m = smollm2()
    refs = [p + r.token_ids for p, r in zip(prompts(), ar(), strict=True)]
    drafter = make_drafter("oracle", m, references=refs)
    engine = Engine(m, drafter, EngineConfig(budget=16, topk=4, block_size=8, max_batch=4))
    return engine.generate(prompts()[:count], params()[:count])


def valid(result: GenerationResult, grammar: SamplingParams) -> bool:
    """The output ended by EOS and matches its grammar (the schema's required keys and types
    checked by hand: jsonschema is not installed)."""
    if result.finish_reason != "stop":
        return False
    if grammar.regex is not None:
        return re.fullmatch(grammar.regex, result.text) is not None
    try:
        value = json.loads(result.text)
    except json.JSONDecodeError:
        return False
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and type(value.get("age")) is int
    )


def test_ddtree_emits_ar_tokens_under_a_json_schema_and_a_regex_greedy_and_sampled() -> None:
    want = ar()
    for result, grammar in zip(want, params(), strict=True):
        assert valid(result, grammar), result.text
    assert want[0].token_ids != want[2].token_ids  # sampling at T = 0.7 did choose otherwise
    got = ddtree()
    assert [r.token_ids for r in got] == [r.token_ids for r in want]
    assert all(r.stats.accepted_tokens > 0 for r in got)  # drafts were accepted, every request


def test_planted_unmasked_drafts_break_exactness_or_validity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    want = ar()
    monkeypatch.setattr(mask, "_FAULTS", {"grammar_drafts_unmasked"})
    got = ddtree(count=2)  # the greedy pair
    broken = [
        r.token_ids != w.token_ids or not valid(r, p)
        for r, w, p in zip(got, want[:2], params()[:2], strict=True)
    ]
    assert any(broken), [r.text for r in got]
