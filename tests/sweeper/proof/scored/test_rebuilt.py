"""An exact scorer's claimed p and above checked against the ones rebuilt from its raw logprobs
(`proof/rebuilt.py`): the true processing's claims hold at every token and setting, and u stays
exact; a claim processed 1.6x hotter is a mismatch naming
both, its PIT the rebuilt one; a row without top logprobs cannot be checked."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from sweeper.proof.scored.processed import Sampling
from sweeper.proof.scored.rebuilt import checked_pit
from tests.sweeper.proof.scored.scored_data import above_of, processed, ranked, softmax
from tests.sweeper.proof.scored.test_processed import SETTINGS, _position

VOCAB, K = 64, 8


def _claimed(z: np.ndarray, token: int, claimed: dict[str, Any], order: Any) -> dict[str, Any]:
    """The token's exact-basis row: raw logprobs and top k of `z`, p and above as processed by
    `claimed`."""
    probs = processed(z, order=order, **claimed)
    p = float(probs[token])
    return {**_position(z, token, K), "p": p, "above": above_of(probs, token) if p else 1.0}


@pytest.mark.parametrize(
    "setting", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items())
)
def test_true_claims_hold_and_hot_ones_do_not(setting: dict[str, Any]) -> None:
    rng = np.random.default_rng(11)
    order = setting.get("order", ("temperature", "top_k", "top_p", "min_p"))
    asked: dict[str, Any] = {
        key: setting.get(key) for key in ("temperature", "top_p", "top_k", "min_p")
    }
    hot = {**asked, "temperature": asked["temperature"] * 1.6}
    sampling = Sampling(order=tuple(order), **asked)
    caught = tokens = 0
    for _ in range(30):
        z = rng.normal(size=VOCAB) * rng.choice([1.0, 3.0, 6.0])
        for token in itertools.chain(ranked(z)[: K + 4], rng.integers(0, VOCAB, size=3)):
            row = _claimed(z, int(token), asked, order)
            got, wrong = checked_pit(row, "exact", sampling, 0.0, vocab=VOCAB)
            assert wrong is None, (token, row["p"], row["above"], wrong)
            if row["p"] > 0:  # u stays exact: rebuilt, or the claim the interval holds
                assert got.exact
                assert got.bounds(0.5) == pytest.approx(2 * (row["above"] + 0.5 * row["p"],))
            hot_row = _claimed(z, int(token), hot, order)
            if abs(hot_row["p"] - row["p"]) > 0.01:
                _, wrong = checked_pit(hot_row, "exact", sampling, 0.0, vocab=VOCAB)
                tokens += 1
                caught += wrong is not None
    assert caught >= 0.9 * tokens > 0  # all but claims the unreturned tail lets stand


def test_a_mismatch_names_both_and_its_pit_is_the_rebuilt_one() -> None:
    z = np.array([6.0, 5.0, 4.0] + [0.0] * 61)
    sampling = Sampling(0.7, top_p=0.9)
    row = _claimed(z, 1, {"temperature": 1.12, "top_p": 0.9}, sampling.order)
    got, wrong = checked_pit(row, "exact", sampling, 0.0, vocab=VOCAB)
    assert wrong is not None and wrong.rebuilt is not None and wrong.rebuilt.exact
    truth = processed(z, 0.7, top_p=0.9)
    assert wrong.rebuilt.p[0] == pytest.approx(truth[1], abs=1e-12)
    assert wrong.text().startswith(f"token 1 claimed p {row['p']:.6g} above {row['above']:.6g}")
    assert f"rebuilt p {truth[1]:.6g} above {truth[0]:.6g}" in wrong.text()
    assert got.exact and got.bounds(0.0)[0] == pytest.approx(truth[0], abs=1e-12)
    # A token the asked nucleus removes, claimed kept (the hot nucleus is wider): removed.
    outside = _claimed(z, 3, {"temperature": 1.12, "top_p": 0.9}, sampling.order)
    assert outside["p"] > 0
    got, wrong = checked_pit(outside, "exact", sampling, 0.0, vocab=VOCAB)
    assert wrong is not None and got.impossible is not None and "rebuilt p 0 " in wrong.text()


def test_a_row_without_top_logprobs_cannot_be_checked() -> None:
    row = {"token": 5, "logprob": -1.0, "p": 0.25, "above": 0.5}
    got, wrong = checked_pit(row, "exact", Sampling(0.7), 0.0)
    assert wrong is not None and "no top logprobs returned" in wrong.text()
    assert got.bounds(0.5) == (0.625, 0.625)  # the claim, unchecked


def test_tokens_tied_with_the_k_th_are_kept_as_the_runtime_keeps_them() -> None:
    """Logits in bfloat16 tie often; the runtime's top-k (`top_k_cut`) keeps every token tied
    with the k-th, so its claims, rebuilt with ties kept, hold, and a tied token past the k-th
    is kept, not removed."""
    z = np.array([3.0, 2.0, 1.0, 1.0, 1.0] + [0.0] * 59)
    tempered = softmax(z / 0.7)
    probs = np.where(z >= 1.0, tempered, 0.0) / tempered[z >= 1.0].sum()  # top-k 3: five kept
    sampling = Sampling(0.7, top_k=3)
    for token in range(5):
        p, above = float(probs[token]), above_of(probs, token)
        row = {**_position(z, token, K), "p": p, "above": above}
        got, wrong = checked_pit(row, "exact", sampling, 0.0, vocab=VOCAB)
        assert wrong is None and got.impossible is None, (token, wrong)
        topk_basis, _ = checked_pit(row, "topk", sampling, 0.0, vocab=VOCAB)
        assert topk_basis.exact and topk_basis.impossible is None
        assert topk_basis.bounds(0.5)[0] == pytest.approx(above + 0.5 * p)
