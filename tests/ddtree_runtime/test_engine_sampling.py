"""Engine sampling is lossless: DDTree samples follow the target distribution, equal AR per seed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch

from ddtree_runtime.algo.sampling import processed_probs
from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
from tests.ddtree_runtime.engine_helpers import oracle_engine, prompts_and_refs, tiny

TEMPERATURE, TOP_K = 1.0, 4
CHI2_DF15_P001 = 37.70  # chi-square critical value, 15 degrees of freedom, p = 0.001


class FixedDrafter:
    """Proposes the target's top-4 at the next two positions: branching trees that often match."""

    name = "fixed"

    def __init__(self, lp: torch.Tensor, tok: torch.Tensor) -> None:
        self.lp, self.tok = lp, tok

    def propose(self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None):
        lp = torch.full((len(contexts), depth, k), float("-inf"))
        tok = torch.zeros((len(contexts), depth, k), dtype=torch.long)
        lp[:, :2, :4], tok[:, :2, :4] = self.lp, self.tok
        return lp, tok


def exact_two_token_distribution(ctx: list[int]) -> dict[tuple[int, int], float]:
    model = tiny().model
    with torch.inference_mode():
        p1 = processed_probs(
            model(input_ids=torch.tensor([ctx])).logits[0, -1], TEMPERATURE, TOP_K, 1.0, 0.0
        )
        out = {}
        for t1 in torch.nonzero(p1).flatten().tolist():
            logits = model(input_ids=torch.tensor([ctx + [t1]])).logits[0, -1]
            p2 = processed_probs(logits, TEMPERATURE, TOP_K, 1.0, 0.0)
            for t2 in torch.nonzero(p2).flatten().tolist():
                out[(t1, t2)] = float(p1[t1] * p2[t2])
    return out


@pytest.mark.slow  # 600 draws through the engine, twice: seconds
def test_ddtree_sampling_matches_target_distribution_and_ar_per_seed() -> None:
    prompts, _ = prompts_and_refs()
    ctx = prompts[6]
    exact = exact_two_token_distribution(ctx)
    assert len(exact) == 16
    by_first = sorted(exact, key=lambda o: exact[o], reverse=True)
    firsts = list(dict.fromkeys(t1 for t1, _ in by_first))[:4]
    seconds = [t2 for t1, t2 in by_first if t1 == firsts[0]][:4]
    drafter = FixedDrafter(
        torch.tensor([[-0.1, -1.0, -2.0, -3.0], [-0.1, -1.0, -2.0, -3.0]]),
        torch.tensor([firsts, seconds]),
    )
    n = 600
    params = [
        SamplingParams(max_tokens=2, temperature=TEMPERATURE, top_k=TOP_K, seed=s) for s in range(n)
    ]
    outs = {}
    for budget in (0, 8):
        engine = Engine(tiny(), drafter, EngineConfig(budget=8, topk=4, block_size=4, max_batch=16))
        results = engine.generate(
            [ctx] * n, [SamplingParams(**{**p.__dict__, "budget": budget}) for p in params]
        )
        outs[budget] = [tuple(r.token_ids) for r in results]
        if budget:
            assert sum(r.stats.accepted_tokens for r in results) > n // 4  # trees were used
    assert outs[8] == outs[0]  # same seed: DDTree sample == AR sample, token for token
    counts = Counter(outs[8])
    assert set(counts) <= set(exact)
    chi2 = sum((counts.get(o, 0) - n * p) ** 2 / (n * p) for o, p in exact.items())
    assert chi2 < CHI2_DF15_P001, (chi2, counts)


def test_same_seed_same_output_whatever_the_batch() -> None:
    prompts, _ = prompts_and_refs()
    p = SamplingParams(max_tokens=24, temperature=0.9, top_p=0.9, seed=42)
    alone = oracle_engine(16, 4, 8).generate([prompts[0]], [p])[0].token_ids
    others = [SamplingParams(max_tokens=24, temperature=1.2, seed=s) for s in (1, 2)]
    crowd = oracle_engine(16, 4, 8).generate(prompts[:3], [p, *others])[0].token_ids
    ar = oracle_engine(0, 1, 2).generate([prompts[0]], [p])[0].token_ids
    assert alone == crowd == ar
    other_seed = (
        oracle_engine(16, 4, 8)
        .generate(
            [prompts[0]], [SamplingParams(max_tokens=24, temperature=0.9, top_p=0.9, seed=43)]
        )[0]
        .token_ids
    )
    assert other_seed != alone


def test_min_p_sample_equals_ar_per_seed_and_greedy_is_unmoved() -> None:
    """Min-p is a per-position processor, so every tree node's choice is AR's at that position:
    DDTree at min-p 0.1 emits AR's tokens for the same seed, every one inside min-p's cut; at
    temperature 0 min-p changes nothing (the argmax is always kept)."""
    prompts, refs = prompts_and_refs()
    model = tiny().model
    cut = [SamplingParams(max_tokens=24, temperature=1.5, min_p=0.1, seed=s) for s in range(4)]
    tree = oracle_engine(16, 4, 8).generate(prompts[:4], cut)
    ar = oracle_engine(0, 1, 2).generate(prompts[:4], cut)
    assert [r.token_ids for r in tree] == [r.token_ids for r in ar]
    plain = oracle_engine(0, 1, 2).generate(
        prompts[:4], [SamplingParams(**{**p.__dict__, "min_p": 0.0}) for p in cut]
    )
    assert [r.token_ids for r in plain] != [r.token_ids for r in ar]  # min-p 0.1 bites here
    with torch.inference_mode():
        for prompt, result in zip(prompts[:4], ar, strict=True):
            ids = torch.tensor([prompt + result.token_ids])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
            probs = processed_probs(logits, 1.5, 0, 1.0, 0.1)
            assert bool((probs.gather(-1, torch.tensor(result.token_ids)[:, None]) > 0).all())
    greedy = [SamplingParams(max_tokens=len(ref), min_p=0.1) for ref in refs[:2]]
    out = oracle_engine(16, 4, 8).generate(prompts[:2], greedy)
    assert [r.token_ids for r in out] == refs[:2]
