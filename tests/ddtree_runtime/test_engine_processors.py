"""Logits processors through the engine (tiny-random, float64): DDTree emits AR's tokens for each
processor, greedy and sampled at a seed, with drafts that are really accepted (an oracle that
knows AR's processed continuation), and AR's greedy tokens are those of an independent loop that
reads the convention literally. Each planted processor fault breaks DDTree only."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
from transformers import DynamicCache

from ddtree_runtime.algo import mask
from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, GenerationResult, SamplingParams
from tests.ddtree_runtime.engine_helpers import prompts_and_refs, tiny
from tests.lanes import grid

MAX_TOKENS = 24
N_PROMPTS = 4  # the faults' prompts


def banned_and_boosted() -> dict[int, float]:
    """A logit bias that moves greedy output: AR's four commonest tokens banned, one boosted."""
    _, refs = prompts_and_refs()
    common = [t for t, _ in Counter(t for r in refs[:N_PROMPTS] for t in r).most_common(5)]
    return {**{t: -100.0 for t in common[:4]}, common[4]: 2.5}


#: One prompt each, verified together (so rows with and without processors share rounds).
ROWS: list[dict[str, Any]] = [
    {"repetition_penalty": 1.3},
    {"frequency_penalty": 0.5},
    {"presence_penalty": 0.8},
    {"logit_bias": banned_and_boosted()},
    {
        "repetition_penalty": 0.8,
        "frequency_penalty": -0.3,
        "presence_penalty": 0.4,
        "logit_bias": banned_and_boosted(),
    },
    {},
    {"repetition_penalty": 0.7},
    {"frequency_penalty": 1.5, "presence_penalty": -1.0},
]


def params(temperature: float, rows: list[dict[str, Any]]) -> list[SamplingParams]:
    return [
        SamplingParams(max_tokens=MAX_TOKENS, temperature=temperature, seed=7 + i, **fields)
        for i, fields in enumerate(rows)
    ]


def ar(temperature: float, rows: list[dict[str, Any]]) -> list[GenerationResult]:
    """The same engine at budget 0 (plain AR: it never drafts)."""
    prompts, _ = prompts_and_refs()
    m = tiny()
    config = EngineConfig(budget=0, topk=1, block_size=2, max_batch=len(rows))
    engine = Engine(m, make_drafter("ngram", m), config)
    return engine.generate(prompts[: len(rows)], params(temperature, rows))


def ddtree(ar_out: list[GenerationResult], temperature: float, rows: list[dict[str, Any]]):
    """DDTree (b16 k4, block 8) drafting from AR's own output under these processors, with the
    oracle's noise: deep trees, some accepted, some not."""
    prompts, _ = prompts_and_refs()
    m = tiny()
    refs = [p + r.token_ids for p, r in zip(prompts, ar_out, strict=False)]
    drafter = make_drafter("oracle", m, references=refs)
    config = EngineConfig(budget=16, topk=4, block_size=8, max_batch=len(rows))
    return Engine(m, drafter, config).generate(prompts[: len(rows)], params(temperature, rows))


@torch.inference_mode()
def literal_greedy(prompt: list[int], fields: dict[str, Any]) -> list[int]:
    """Greedy decoding by a plain Hugging Face loop (its own cache, one token at a time), the
    processors read word for word (bias; repetition over prompt + output; frequency and
    presence over output)."""
    m = tiny()
    out: list[int] = []
    rp = fields.get("repetition_penalty", 1.0)
    fp, pp = fields.get("frequency_penalty", 0.0), fields.get("presence_penalty", 0.0)
    cache = DynamicCache(config=m.model.config)
    ids = prompt
    for _ in range(MAX_TOKENS):
        forward = m.model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
        row = forward.logits[0, -1].tolist()
        for token, bias in fields.get("logit_bias", {}).items():
            row[token] += bias
        counts = Counter(out)
        for t in set(prompt) | set(out):
            row[t] = row[t] / rp if row[t] > 0 else row[t] * rp
        for t, count in counts.items():
            row[t] -= fp * count + pp
        out.append(max(range(len(row)), key=lambda t: (row[t], -t)))
        if out[-1] in m.eos_token_ids:
            break
        ids = out[-1:]
    return out


@pytest.mark.parametrize("temperature", grid((0.7,), [0.0, 0.7]))
def test_ddtree_emits_ar_tokens_under_each_processor(temperature: float) -> None:
    want = ar(temperature, ROWS)
    got = ddtree(want, temperature, ROWS)
    assert [r.token_ids for r in got] == [r.token_ids for r in want]
    assert sum(r.stats.accepted_tokens for r in got) > len(ROWS) * MAX_TOKENS // 4
    plain = ar(temperature, [{}] * len(ROWS))
    bites = [a.token_ids != b.token_ids for a, b in zip(plain, want, strict=True)]
    assert bites == [bool(fields) for fields in ROWS]  # each processor moves its row's output
    if temperature == 0:  # and AR's is the convention's greedy output
        prompts, _ = prompts_and_refs()
        literal = [literal_greedy(p, fields) for p, fields in zip(prompts, ROWS, strict=False)]
        assert [r.token_ids for r in want] == literal


#: Per planted fault, processors and a temperature under which tiny-random shows it.
FAULTS: dict[str, tuple[dict[str, Any], float]] = {
    "penalty_committed_only": ({"repetition_penalty": 0.7}, 0.0),
    "penalty_whole_tree": ({"frequency_penalty": 0.5}, 0.0),
    "logit_bias_drafts_ignored": ({"logit_bias": banned_and_boosted()}, 0.0),
    "min_p_drafts_ignored": ({"min_p": 0.1}, 1.5),
}


@pytest.mark.parametrize("fault", grid(("penalty_whole_tree",), sorted(FAULTS)))
def test_planted_processor_fault_breaks_ddtree_only(fault: str) -> None:
    fields, temperature = FAULTS[fault]
    rows = [fields] * N_PROMPTS
    clean = ar(temperature, rows)
    mask._FAULTS.add(fault)
    try:
        faulty_ar = ar(temperature, rows)
        faulty = ddtree(clean, temperature, rows)
    finally:
        mask._FAULTS.discard(fault)
    assert [r.token_ids for r in faulty_ar] == [r.token_ids for r in clean]  # AR: untouched
    assert [r.token_ids for r in faulty] != [r.token_ids for r in clean]


def test_stop_checked_at_round_ends_emits_past_the_stop() -> None:
    """`stop_round_end`: a stop string that completes inside an accepted run of drafts is seen
    only once the round's last token is pushed, so DDTree emits tokens AR never does; AR rounds
    (one token) are untouched, and the clean engine stops where AR does."""
    m = tiny()
    prompts, refs = prompts_and_refs()
    stops = []
    for ref in refs[:N_PROMPTS]:
        text = m.tokenizer.decode(ref)
        start = next(j for j in range(8, len(text) - 2) if text[j : j + 2].isprintable())
        stops.append(text[start : start + 2])
    known = [p + r for p, r in zip(prompts, refs, strict=True)]
    drafter = make_drafter("oracle", m, references=known)

    def run(budget: int) -> list[tuple[list[int], str]]:
        engine = Engine(m, drafter, EngineConfig(budget=16, topk=2, block_size=16, max_batch=4))
        each = [SamplingParams(max_tokens=MAX_TOKENS, stop=[stop], budget=budget) for stop in stops]
        return [(r.token_ids, r.text) for r in engine.generate(prompts[:N_PROMPTS], each)]

    clean_ar, clean = run(0), run(16)
    mask._FAULTS.add("stop_round_end")
    try:
        faulty_ar, faulty = run(0), run(16)
    finally:
        mask._FAULTS.discard("stop_round_end")
    assert clean == clean_ar == faulty_ar
    assert [ids for ids, _ in faulty] != [ids for ids, _ in clean_ar]
    assert [text for _, text in faulty] == [text for _, text in clean_ar]  # text is still cut
