"""Near ties on the logit scale (`proof/scored/processed.py`, `proof/scored/judge.py`): a token
outside top-k is a near tie only if its raw logprob is within the scorer's margin (nats) of the
boundary's, the k-th token's. The issue's run: top-k 20 ignored on drafted nodes, three tokens of
rank 23, 26 and 27 drawn, 0.25-0.41 nats below the 20th but a hair of the tempered mass outside:
each was a near tie, under the AR control's rate, and the point passed. Here they are impossible
tokens, shown with their distance and the margin; a token a few 1e-5 nats outside stays a near
tie."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sweeper.proof.scored.judge import control, judge
from sweeper.proof.scored.processed import Sampling, pit
from sweeper.spec import DeterminismSpec
from tests.sweeper.proof.scored.scored_data import (
    ORDER,
    exact_position,
    position_table,
    ranked,
    records,
    target,
)

POLICY = DeterminismSpec()
#: The scorer's margin as a record states it (the bundled runtime's exact route: numerics).
MARGIN = 1e-3
#: The margin in tempered mass the judge used before (`scored_near_tie_margin` 0.005).
OLD_MASS_MARGIN = 0.005
TOP_K = 20
#: Samples per prompt: 1,536 tokens a point (the issue's: 1,506).
N = 16
#: (prompt, position, rank drawn, its raw logprob's distance below the 20th token's, nats).
ISSUE = ((0, 3, 23, 0.25), (1, 7, 26, 0.33), (2, 11, 27, 0.41))
ASKED = {"temperature": 0.7, "top_p": None, "top_k": TOP_K, "min_p": None}


def shaped(z: np.ndarray, rank: int, nats: float) -> np.ndarray:
    """`z` with its tail from the 20th token on respaced: the token of `rank` `nats` below the
    20th (raw logprobs differ as the logits do), the ranks between evenly spaced, the rest
    further down."""
    order = ranked(z)
    tail = order[TOP_K - 1 :]
    near = np.linspace(0.0, nats, rank - TOP_K + 1)
    rest = nats + 0.1 * np.arange(1, tail.size - near.size + 1)
    out = z.copy()
    out[tail] = z[order[TOP_K - 1]] - np.concatenate([near, rest])
    return out


def planted(
    plants: tuple[tuple[int, int, int, float], ...], basis: str, k: int
) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """A correct top-k 20 sampler's rows with the `plants` drawn in sample 0 of their prompts,
    the AR control's columns (its own correct samples), and the planted positions."""
    logits = target(4, 24, 64, seed=1)
    for prompt, at, rank, nats in plants:
        logits[prompt, at] = shaped(logits[prompt, at], rank, nats)
    common: dict[str, Any] = {"top_k": TOP_K, "basis": basis, "k": k, "near_tie_margin": MARGIN}
    rows = records(logits, N, seed=2, **common)
    ar = control(records(logits, N, role="ar", seed=1, **common), POLICY)
    shown = []
    for prompt, at, rank, _ in plants:
        table = position_table(logits[prompt, at], ORDER, ASKED, ASKED, k)
        token = int(ranked(logits[prompt, at])[rank - 1])
        position = exact_position(table, token)
        if basis == "topk":
            position = {key: position[key] for key in ("token", "logprob", "rank", "top")}
        row = rows[prompt * N]
        row["positions"] = [*row["positions"][:at], position, *row["positions"][at + 1 :]]
        shown.append(position)
    return rows, ar, shown


@pytest.mark.parametrize(("basis", "k"), [("exact", 8), ("topk", 32)])
def test_top_k_violations_in_the_tail_are_impossible_tokens_not_near_ties(
    basis: str, k: int
) -> None:
    rows, ar, shown = planted(ISSUE, basis, k)
    if basis == "exact":  # the issue's run: each a hair of the tempered mass outside
        assert all(0 < p["gap"] < OLD_MASS_MARGIN for p in shown), [p["gap"] for p in shown]
        assert [round(p["boundary"] - p["logprob"], 6) for p in shown] == [0.25, 0.33, 0.41]
    assert ar["scored_control_impossible"] == 0 and ar["scored_control_near_ties"] == 0
    found, columns = judge(rows, POLICY, control_point=ar)
    assert found.verdict == "impossible-token", found.detail
    assert columns["scored_impossible_n"] == 3 and columns["scored_near_ties"] == 0
    first = columns["scored_impossible"]
    assert first.startswith(f"prompt q0 sample 0 position 3: token {shown[0]['token']} (rank 23)")
    assert "0.25 nats below the top-k boundary" in first and first in found.detail
    assert f"near-tie margin {MARGIN:g} nats" in found.detail


def test_a_token_a_few_1e_5_nats_outside_top_k_is_still_a_near_tie() -> None:
    rows, ar, shown = planted(((0, 3, 21, 3e-5),), "exact", 8)
    assert shown[0]["p"] == 0.0 and shown[0]["rank"] == 21
    found, columns = judge(rows, POLICY, control_point=ar)
    assert found.verdict == "distribution-ok", found.detail
    assert columns["scored_near_ties"] == 1 and columns["scored_impossible_n"] == 0
    assert f"near-tie margin {MARGIN:g} nats" in found.detail


def test_a_token_whose_tempered_weight_underflows_is_far_not_near() -> None:
    # Top-20 basis: the token 900 nats below the top, its tempered weight exp(-1286) is 0.
    top = [(i, -0.1 - 0.05 * i) for i in range(32)]
    position = {"token": 99, "logprob": -900.0, "rank": 5000, "top": top}
    got = pit(position, "topk", Sampling(0.7, top_k=TOP_K), MARGIN)
    assert got.impossible is not None and not got.near_tie
    assert got.impossible.nats == pytest.approx(900.0 - 0.1 - 0.05 * (TOP_K - 1))
