"""Scoring a continuation (`ddtree_runtime.score`) against a brute-force reading of the same
distribution: for every token of a small vocabulary, under temperature, min-p, top-k and top-p, its
processed probability, the mass above it, its raw rank, and how far outside the truncation it
fell (in tempered mass, and the raw logprob of the boundary: the least likely token kept). Then
the property the statistics rest on: tokens the sampler draws have p > 0 and a randomized PIT
that is uniform."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ddtree_runtime.algo.processors import LOGIT_ORDER, REPETITION_SCOPE, Processors
from ddtree_runtime.algo.sampling import processed_probs, sample_with_uniform
from ddtree_runtime.score import ORDER, continuation_logits, score_continuation, score_rows
from tests.ddtree_runtime.algo.test_processors import literal
from tests.ddtree_runtime.engine_helpers import tiny

VOCAB = 12


def brute(
    row: list[float], temperature: float, top_k: int, top_p: float, min_p: float
) -> list[dict]:
    """Each token's score by reading the definition literally (no shared code): min-p, then
    top-k, then top-p, each on what the one before left."""
    scaled = [x / temperature for x in row]
    big = max(scaled)
    tempered = [math.exp(s - big) for s in scaled]
    total = sum(tempered)
    tempered = [t / total for t in tempered]
    keep_m = {i for i in range(VOCAB) if tempered[i] >= min_p * max(tempered)}
    order = sorted(range(VOCAB), key=lambda i: (-scaled[i], i))
    ranked = [i for i in order if i in keep_m]
    keep_k = set(ranked[:top_k]) if 0 < top_k < len(ranked) else set(keep_m)
    if 0 < top_k < len(ranked):  # ties at the k-th value are kept
        keep_k |= {i for i in ranked if scaled[i] == scaled[ranked[top_k - 1]]}
    mass_k = sum(tempered[i] for i in keep_k)
    after_k = [tempered[i] / mass_k if i in keep_k else 0.0 for i in range(VOCAB)]
    kept, before, running = set(), {}, 0.0
    for i in order:
        before[i] = running
        if i in keep_k and (top_p >= 1 or running < top_p):
            kept.add(i)
        running += after_k[i]
    mass = sum(after_k[i] for i in kept)
    p = [after_k[i] / mass if i in kept else 0.0 for i in range(VOCAB)]
    raw_big = max(row)
    raw_lse = raw_big + math.log(sum(math.exp(x - raw_big) for x in row))
    boundary = min(row[i] for i in kept) - raw_lse
    # Min-p's boundary is its threshold: the top raw logprob + T ln(min_p).
    threshold = raw_big - raw_lse + temperature * math.log(min_p) if min_p > 0 else None
    out = []
    for t in range(VOCAB):
        rank = 1 + sum(row[j] > row[t] or (row[j] == row[t] and j < t) for j in range(VOCAB))
        above = sum(p[j] for j in range(VOCAB) if p[j] > p[t] or (p[j] == p[t] and j < t))
        gap: float | None = None
        bound: float | None = boundary
        if p[t] == 0:
            if t not in keep_m:
                gap, bound = min_p * max(tempered) - tempered[t], threshold
            elif t not in keep_k:
                kth = min(tempered[i] for i in keep_k)
                gap = kth - tempered[t]
            else:
                gap = (before[t] - top_p) * mass_k
        out.append({"logprob": row[t] - raw_lse, "rank": rank, "p": p[t], "above": above,
                    "gap": gap, "boundary": None if gap is None else bound})  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p", "min_p"),
    [
        *[(1.0, 0, 1.0, 0.0), (0.7, 0, 0.9, 0.0), (0.7, 4, 1.0, 0.0), (1.3, 5, 0.8, 0.0)],
        *[(0.5, 3, 0.6, 0.0), (0.7, 0, 1.0, 0.1), (1.3, 5, 0.8, 0.05), (1.0, 3, 0.9, 0.3)],
    ],
)
def test_every_tokens_score_is_the_distributions_own(
    temperature: float, top_k: int, top_p: float, min_p: float
) -> None:
    rng = np.random.default_rng(7)
    rows = rng.normal(0, 2, size=(6, VOCAB)).round(1)  # rounded: ties in raw logits occur
    for row in rows:
        logits = torch.tensor(np.repeat(row[None, :], VOCAB, axis=0))
        scores = score_rows(logits, list(range(VOCAB)), temperature, top_k, top_p, min_p, 5)
        want = brute(list(row), temperature, top_k, top_p, min_p)
        # Every position's best 5 by raw logprob (ties: the lower id), whatever was drawn.
        best = sorted(range(VOCAB), key=lambda t: want[t]["rank"])[:5]
        for got in scores:
            assert [t for t, _ in got.top] == best
            assert [lp for _, lp in got.top] == pytest.approx([want[t]["logprob"] for t in best])
        for got, expected in zip(scores, want, strict=True):
            assert got.rank == expected["rank"]
            assert got.logprob == pytest.approx(expected["logprob"], abs=1e-9)
            assert got.p == pytest.approx(expected["p"], abs=1e-9)
            if expected["p"] > 0:
                assert got.above == pytest.approx(expected["above"], abs=1e-9)
                assert got.gap is None and got.boundary is None
            else:  # removed: exactly 0, whichever step removed it
                assert got.p == 0.0
                assert got.above == pytest.approx(1.0)
                assert got.gap is not None and expected["gap"] is not None
                assert got.gap == pytest.approx(max(expected["gap"], 0.0), abs=1e-9)
                assert got.boundary == pytest.approx(expected["boundary"], abs=1e-9)


def test_the_samplers_draws_score_inside_the_distribution_with_a_uniform_pit() -> None:
    """What a lossless engine's output looks like to the scorer: every drawn token has p > 0,
    and above + V * p is uniform (a Kolmogorov-Smirnov distance well inside its 1% bound)."""
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(4000, VOCAB, generator=generator, dtype=torch.float64) * 2
    probs = processed_probs(logits, 0.8, 6, 0.9, 0.05)
    tokens = sample_with_uniform(probs, torch.rand(4000, generator=generator, dtype=torch.float64))
    scores = score_rows(logits, tokens.tolist(), 0.8, 6, 0.9, 0.05, 0)
    assert all(s.p > 0 for s in scores)
    v = np.random.default_rng(1).random(len(scores))
    u = np.sort([s.above + vi * s.p for s, vi in zip(scores, v, strict=True)])
    n = len(u)
    distance = max(np.max(np.arange(1, n + 1) / n - u), np.max(u - np.arange(n) / n))
    assert distance < 1.63 / math.sqrt(n)


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p", "min_p"),
    [
        *[(0.7, 0, 1.0, 0.0), (0.7, 0, 0.9, 0.0), (0.7, 5, 1.0, 0.0), (1.3, 5, 0.8, 0.0)],
        *[(0.5, 3, 0.6, 0.0), (0.7, 0, 1.0, 0.1), (1.3, 5, 0.8, 0.05), (0.7, 20, 0.9, 0.1)],
    ],
)
def test_the_judge_rebuilds_these_claims_from_the_raw_logprobs(
    temperature: float, top_k: int, top_p: float, min_p: float
) -> None:
    """The contract with the judge (`sweeper.proof.scored.rebuilt`): every token's p and above, as
    this runtime claims them beside its raw top logprobs, are the ones the judge rebuilds from those
    at the asked parameters in `ORDER`, on bfloat16-rounded logits (ties at the k-th, kept);
    claims processed 1.6x hotter than asked (a hot `processed_probs`, shared by the sampler and
    this route) are not."""
    from sweeper.proof.scored.processed import Processed, Sampling, processed
    from sweeper.proof.scored.rebuilt import checked_pit

    vocab, top = 96, 16
    generator = torch.Generator().manual_seed(5)
    rows = (torch.randn(8, vocab, generator=generator) * 3).bfloat16().to(torch.float64)
    sampling = Sampling(temperature, top_p=top_p, top_k=top_k, min_p=min_p, order=ORDER)
    hot_caught = hot_moved = min_p_nats = 0
    for row in rows:
        logits = row[None, :].repeat(vocab, 1)
        asked = score_rows(logits, list(range(vocab)), temperature, top_k, top_p, min_p, top)
        hot = score_rows(logits, list(range(vocab)), temperature * 1.6, top_k, top_p, min_p, top)
        for right, wrong in zip(asked, hot, strict=True):
            _, mismatch = checked_pit(right.as_dict(), "exact", sampling, 0.0, vocab=vocab)
            assert mismatch is None, mismatch
            found = processed(right.as_dict(), sampling, vocab)
            assert isinstance(found, Processed)  # no logit processor: always rebuilt
            removed = found.removed
            if removed is not None and removed.step == "min_p":  # the judge's threshold, in nats
                assert right.boundary is not None and removed.nats is not None
                assert right.boundary - right.logprob == pytest.approx(removed.nats, abs=1e-9)
                min_p_nats += 1
            if abs(wrong.p - right.p) > 0.01:
                hot_moved += 1
                hot_caught += (
                    checked_pit(wrong.as_dict(), "exact", sampling, 0.0, vocab)[1] is not None
                )
    assert hot_caught >= 0.9 * hot_moved > 0
    assert (min_p_nats > 0) == (min_p > 0)


def test_the_catalog_states_the_order_this_route_scores_in() -> None:
    """The sweeper's catalog entry for this runtime (what its judge and the power bench read) is
    the whole order `/score` and `/server_info` state: the logit processors `processed_logits`
    applies, in order, with the tokens its repetition penalty counts, then the steps
    `processed_probs` applies, with min-p and without."""
    from ddtree_runtime.server.state import SCORING as STATED
    from sweeper.proof.scored.catalog import SCORING

    scoring = SCORING["ddtree_runtime"]
    assert scoring.order(None) == scoring.order(None, 0.1) == ORDER == tuple(STATED["order"])
    found = scoring.orders_of(None)
    assert found.logits == LOGIT_ORDER == tuple(STATED["logit_order"])
    assert found.repetition_scope == REPETITION_SCOPE == STATED["repetition_scope"]


def test_a_positions_logsumexp_recovers_its_raw_logits() -> None:
    """`logsumexp` is the raw logits' (whatever the processors): logprob + logsumexp is the raw
    logit of the token and of each `top` entry, its sign the repetition penalty's."""
    logits = torch.tensor([[2.5, -1.0, 0.3, -4.0], [-0.5, -2.0, 1.5, 0.0]], dtype=torch.float64)
    rows = score_rows(logits, [1, 3], 0.7, 0, 1.0, 0.0, 4, processed=logits * 1.3)
    for row, score in zip(logits, rows, strict=True):
        assert score.logprob + score.logsumexp == pytest.approx(float(row[score.token]))
        assert [lp + score.logsumexp for _, lp in score.top] == pytest.approx(
            sorted(row.tolist(), reverse=True)
        )
        assert score.as_dict()["logsumexp"] == score.logsumexp


def test_processors_score_each_position_from_the_prompt_and_its_own_prefix() -> None:
    """With penalties and a logit bias, position i is scored under the logits processed from the
    prompt and the continuation's first i tokens (then temperature, min-p, top-k, top-p), as the
    sampler drew it: p, above and a dropped token's boundary (the processed log-softmax of the
    least likely kept token) from those, logprob, rank and top from the raw logits."""
    m = tiny()
    prompt = m.tokenizer.encode("abcabcabc")
    continuation = [prompt[1], prompt[2], 7, 7, prompt[1], 9, 7, 200]
    processors = Processors(1.3, 0.5, 0.4, ((7, 2.0), (9, -3.0), (200, 4.0)))
    asked = (0.7, 0, 0.9, 0.0)
    scores = score_continuation(m.model, prompt, continuation, *asked, 3, processors)
    raw = continuation_logits(m.model, prompt, continuation)
    dropped = 0
    for i, (score, token) in enumerate(zip(scores, continuation, strict=True)):
        hand = torch.tensor(
            literal(raw[i].tolist(), processors, prompt, continuation[:i]), dtype=torch.float64
        )
        probs = processed_probs(hand, *asked)
        assert score.p == pytest.approx(float(probs[token]), abs=1e-12)
        assert score.logprob == pytest.approx(float(torch.log_softmax(raw[i], -1)[token]))
        assert [t for t, _ in score.top] == torch.topk(raw[i], 3).indices.tolist()
        if score.p > 0:
            above = probs[
                (probs > probs[token])
                | ((probs == probs[token]) & (torch.arange(len(probs)) < token))
            ]
            assert score.above == pytest.approx(float(above.sum()), abs=1e-12)
        else:
            dropped += 1
            kept = torch.log_softmax(hand, -1)[probs > 0]
            assert score.boundary == pytest.approx(float(kept.min()), abs=1e-12)
    assert dropped > 0
    plain = score_continuation(m.model, prompt, continuation, *asked, 3, Processors())
    assert [s.p for s in plain] != [s.p for s in scores]
