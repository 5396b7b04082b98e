"""One token's PIT (`proof/scored/processed.py`): exact on the exact basis; on the top-k basis an
interval that holds the exact value whatever the unreturned tail, proofs only where the full
distribution agrees, and a token outside the top k uniform above their processed mass. The colder
ratio: mean 0 under the null, falling with u."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from sweeper.proof.scored.processed import Sampling, colder_ratio, pit, temperature_score
from tests.sweeper.proof.scored.scored_data import above_of, processed, ranked, softmax


def _position(z: np.ndarray, token: int, k: int) -> dict[str, object]:
    raw = z - (np.log(np.exp(z - z.max()).sum()) + z.max())
    best = ranked(raw)[:k]
    return {
        "token": token,
        "logprob": float(raw[token]),
        "rank": int(np.flatnonzero(ranked(raw) == token)[0]) + 1,
        "top": [(int(i), float(raw[i])) for i in best],
    }


def test_the_exact_basis_is_above_plus_v_times_p() -> None:
    token = pit({"token": 5, "p": 0.25, "above": 0.5}, "exact", Sampling(0.7), 0.005)
    assert token.exact and token.impossible is None
    assert token.bounds(0.5) == (0.625, 0.625)
    removed = {"token": 5, "logprob": -6.0, "rank": 40, "p": 0.0, "above": 1.0, "gap": 0.03,
               "kept": 0.91, "boundary": -5.59}  # fmt: skip
    out = pit(removed, "exact", Sampling(0.7, top_p=0.9), 0.001)
    assert out.impossible is not None and not out.near_tie and out.impossible.rank == 40
    assert out.impossible.text() == (
        "token 5 (rank 40) 0.41 nats below the top-p boundary (kept mass 0.91, by 0.03 of the "
        "tempered mass)"
    )
    # Ranked below an asked top-k: that is what removed it, whatever else was asked.
    below = pit(removed, "exact", Sampling(0.7, top_p=0.9, top_k=20), 0.001).impossible
    assert below is not None and below.step == "top_k"
    # Within the margin (nats) of the boundary: a near tie; with no boundary stated, never.
    close = {**removed, "boundary": -6.0 + 3e-5}
    tie = pit(close, "exact", Sampling(0.7, top_p=0.9), 0.001)
    assert tie.impossible is not None and tie.near_tie
    unstated = pit({**close, "boundary": None}, "exact", Sampling(0.7, top_p=0.9), 0.001)
    assert unstated.impossible is not None and not unstated.near_tie


SETTINGS = [
    {"temperature": 0.7},
    {"temperature": 0.7, "top_p": 0.9},
    {"temperature": 0.5, "top_p": 0.8, "top_k": 5},
    {"temperature": 0.7, "top_k": 12},  # top-k beyond the returned k: the tail is partly kept
    {"temperature": 1.3, "top_p": 0.95},  # above 1: the tail bounded by the vocabulary
    {"temperature": 0.8, "min_p": 0.05},
    {
        "temperature": 0.8,
        "min_p": 0.1,
        "top_p": 0.9,
        "order": ("temperature", "min_p", "top_k", "top_p"),
    },
    {"temperature": 0.9, "top_k": 6, "top_p": 0.7, "order": ("temperature", "top_k+top_p")},
]


@pytest.mark.parametrize(
    "setting", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items())
)
def test_the_top_k_interval_holds_the_exact_u_and_proves_only_what_is_proven(
    setting: dict[str, Any],
) -> None:
    rng = np.random.default_rng(7)
    vocab, k = 64, 8
    order = setting.get("order", ("temperature", "top_k", "top_p", "min_p"))
    asked: dict[str, Any] = {
        key: setting.get(key) for key in ("temperature", "top_p", "top_k", "min_p")
    }
    sampling = Sampling(order=tuple(order), **asked)
    exact_seen = inexact_seen = proofs = 0
    for case in range(60):
        z = rng.normal(size=vocab) * rng.choice([1.0, 3.0, 6.0])
        probs = processed(z, order=order, **asked)
        tempered = softmax(z / asked["temperature"])
        for token in itertools.chain(ranked(z)[: k + 4], rng.integers(0, vocab, size=3)):
            token = int(token)
            got = pit(_position(z, token, k), "topk", sampling, 0.0, vocab=vocab)
            if got.impossible is not None:
                assert probs[token] == 0.0, (case, token)  # never a false proof
                assert (
                    got.impossible.gap is None
                    or got.impossible.gap <= above_of(tempered, token) + 1e-9
                )
                proofs += 1
                continue
            returned = token in ranked(z)[:k]
            if probs[token] == 0:
                continue  # the target never draws it: no PIT to hold (an unproven removal)
            for v in (0.0, 0.3, 1.0):
                # A token outside the top k: u = Q + V (1 - Q), Q the top k's processed mass.
                q = float(probs[ranked(z)[:k]].sum())
                truth = above_of(probs, token) + v * probs[token] if returned else q + v * (1 - q)
                lo, hi = got.bounds(v)
                assert lo - 1e-9 <= truth <= hi + 1e-9, (case, token, v, lo, truth, hi)
            exact_seen += got.exact
            inexact_seen += not got.exact
    assert exact_seen + inexact_seen > 0
    truncated = any(setting.get(key) for key in ("top_p", "top_k", "min_p"))
    assert (proofs > 0) == truncated  # the checks above saw proofs wherever there can be any


def test_a_token_outside_the_top_k_is_uniform_above_their_processed_mass() -> None:
    z = np.array([4.0, 3.0, 2.0, 1.0] + [0.0] * 60)
    got = pit(_position(z, 30, 4), "topk", Sampling(1.0), 0.0, vocab=64)
    top = softmax(z)[:4].sum()  # temperature 1, untruncated: the tail's weight is known exactly
    assert got.exact
    assert got.bounds(0.0) == pytest.approx((top, top))
    assert got.bounds(1.0) == pytest.approx((1.0, 1.0))


def test_a_nucleus_closed_inside_the_top_k_makes_an_outside_token_a_proof_with_evidence() -> None:
    z = np.array([6.0, 5.0, 4.0] + [0.0] * 61)
    position = _position(z, 40, 8)
    got = pit(position, "topk", Sampling(0.7, top_p=0.9), 0.001, vocab=64)
    assert got.impossible is not None and not got.near_tie
    evidence = got.impossible
    assert evidence.step == "top_p" and evidence.rank == position["rank"]
    assert evidence.gap is not None and evidence.gap > 0.005
    # The nucleus is the top two (logits 6 and 5): the token's logit 0 is 5 nats below its last.
    assert evidence.nats == pytest.approx(5.0)
    assert "5 nats below the top-p boundary" in evidence.text()
    # Within the margin it is a near tie, never a proof.
    assert pit(position, "topk", Sampling(0.7, top_p=0.9), 5.5, vocab=64).near_tie


def test_top_k_within_the_returned_k_is_exact() -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(size=64) * 2
    token = int(ranked(z)[2])
    got = pit(_position(z, token, 8), "topk", Sampling(0.7, top_k=5), 0.0, vocab=64)
    probs = processed(z, 0.7, top_k=5)
    assert got.exact
    assert got.bounds(0.4)[0] == pytest.approx(above_of(probs, token) + 0.4 * probs[token])


def test_the_order_is_checked() -> None:
    with pytest.raises(ValueError, match="temperature must come first"):
        Sampling(0.7, top_p=0.9, order=("top_p", "temperature"))
    with pytest.raises(ValueError, match="unknown step"):
        Sampling(0.7, order=("temperature", "typical_p"))
    z = np.arange(10.0)
    with pytest.raises(ValueError, match="unknown scoring basis"):
        pit({"token": 1}, "full", Sampling(0.7), 0.0)
    with pytest.raises(ValueError, match="only sampled tokens"):
        pit(_position(z, 9, 4), "topk", Sampling(0.0), 0.0)
    assert math.isfinite(pit(_position(z, 9, 4), "topk", Sampling(0.7), 0.0).bounds(0.5)[0])


@pytest.mark.parametrize("top_p", [None, 0.9])
def test_the_colder_ratio_is_centred_and_falls_with_u(top_p: float | None) -> None:
    """Its mean at a uniform u is 0 (the null keeps its level whatever the steps), it rewards
    the likeliest tokens and falls with u (so an interval's least value is at its top), and a
    draw from the tail costs it at most 1."""
    z = np.random.default_rng(4).normal(size=64) * 2.5
    sampling = Sampling(0.7, top_p=top_p)
    score = temperature_score(_position(z, 0, 8), sampling)
    assert score is not None
    ratio = colder_ratio(score, 0.6)
    widths = np.diff([0.0, *ratio.edges])
    assert float(np.sum(widths * np.array(ratio.values))) == pytest.approx(0.0, abs=1e-12)
    assert ratio.variance == pytest.approx(float(np.sum(widths * np.array(ratio.values) ** 2)))
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(ratio.values))
    assert ratio.values[0] > 0 and min(ratio.values) >= -1.0
    with pytest.raises(ValueError, match="must lie in"):
        colder_ratio(score, 1.5)
