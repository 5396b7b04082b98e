"""A point's scored verdict as its run records it (`sweeper.proof.scored_verdict`): the scorer
must have rescored enough of the AR server's own outputs for its agreement to say anything (over
fewer tokens than `MIN_AGREEMENT_TOKENS`, none where the AR scores' positions were emptied, the
verdict is `unproven`, saying so); a point whose samples could not all be scored stays pending;
beside coupling the scored verdict decides only where it finds a violation. Pure: score rows
and columns in, verdicts and columns out."""

from __future__ import annotations

from typing import Any

from sweeper.proof.agreement import MIN_AGREEMENT_TOKENS, rescored
from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.scored import control
from sweeper.proof.scored_verdict import deciding, failures, judged, merge, not_yet, settled_columns
from sweeper.results.scores import SELF
from sweeper.spec import DeterminismSpec
from tests.sweeper.proof.scored_data import records, target

POLICY = DeterminismSpec()
SCORER = "ar-cg0-rs1"
LOGITS = target(4, 24, 64, seed=1)


def _judged(ar_positions: int | None) -> tuple[SampledVerdict, dict[str, Any]]:
    """A speculative point's verdict, its samples (correctly drawn) scored by `SCORER`, the AR
    point's own scores keeping `ar_positions` positions each (None: all), as rescored by it."""
    own = records(LOGITS, 32, role="control", point_id="ar", seed=1)
    trimmed = [{**r, "positions": r["positions"][:ar_positions]} for r in own]
    ar_rows = [*trimmed, *({**r, "scorer": SCORER} for r in trimmed)]
    # Seed 5: a draw whose p-value stands well above alpha (seed 0's sits near it).
    tests = [{**r, "scorer": SCORER} for r in records(LOGITS, 32, point_id="spec", seed=5)]
    control_point = control(own, POLICY)
    return judged(
        tests, ar_rows, scorer=SCORER, label=SCORER, control_point=control_point, policy=POLICY
    )


def test_an_agreement_over_no_tokens_proves_nothing() -> None:
    verdict, columns = _judged(0)
    assert (columns["score_agreement"], columns["score_agreement_n"]) == (None, 0)
    assert verdict.verdict == "unproven", verdict.detail
    assert f"agreement over 0 tokens < {MIN_AGREEMENT_TOKENS}" in verdict.detail
    # The judge's own verdict stays on the point, beside the one the agreement left.
    assert (columns["scored_verdict"], columns["scored_by"]) == ("distribution-ok", SCORER)


def test_an_agreement_over_enough_tokens_keeps_the_verdict() -> None:
    verdict, columns = _judged(None)
    assert columns["score_agreement"] == 0.0
    assert columns["score_agreement_n"] >= MIN_AGREEMENT_TOKENS
    assert verdict.verdict == "distribution-ok", verdict.detail


def test_a_scorer_rescores_each_prompts_first_output_the_ar_scored_itself() -> None:
    own = records(LOGITS, 3, role="control", point_id="ar", seed=1)
    failed = {**own[0], "error": "timeout", "positions": []}
    rows = [failed, *own[1:], *({**r, "scorer": SCORER} for r in own)]
    keys = rescored(rows)
    # Prompt q0's first output failed: its second stands for it; the others' first.
    assert sorted((k[4], k[5]) for k in keys) == [("q0", 1), ("q1", 0), ("q2", 0), ("q3", 0)]


def test_samples_not_all_scored_leave_the_point_pending() -> None:
    rows = [{"scorer": SELF}, {"scorer": SELF, "error": "connection refused"}]
    reason = failures(rows)
    assert reason == "1 of 2 samples: connection refused"
    assert failures(rows[:1]) is None
    verdict = not_yet(reason)
    assert verdict.verdict == "unproven" and "`sweeper run --resume` scores them" in verdict.detail
    line = settled_columns(verdict, {"scored_detail": verdict.detail}, pending=True)
    assert line == {
        "scored_detail": verdict.detail,
        "scored_pending": True,
        "determinism": "unproven",
        "sampled_detail": verdict.detail,
        "unproven_reason": verdict.detail,
    }
    ok = settled_columns(SampledVerdict("distribution-ok", "p 0.4"), {}, pending=False)
    assert (ok["determinism"], ok["unproven_reason"], ok["scored_pending"]) == (
        "distribution-ok",
        "",
        False,
    )


def test_beside_coupling_the_scored_verdict_decides_only_a_violation() -> None:
    found = SampledVerdict("impossible-token", "token 7 has probability 0")
    assert deciding("scored", found) == found
    assert deciding("coupled", found) is None
    coupled = {"determinism": "exact", "sampled_detail": "", "scored_verdict": None}
    scored = {"scored_verdict": "impossible-token", "scored_detail": found.detail}
    merged = merge(coupled, scored)
    assert merged["determinism"] == "impossible-token"
    assert merged["sampled_detail"] == f"scored beside coupling: {found.detail}"
    # A clean scored verdict changes nothing; nor does one beside a violation already seen.
    assert merge(coupled, {"scored_verdict": "distribution-ok"})["determinism"] == "exact"
    diverged = {**coupled, "determinism": "diverged"}
    assert merge(diverged, scored)["determinism"] == "diverged"
