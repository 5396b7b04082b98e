"""A point's scored verdict as its run records it (`sweeper.proof.scored.verdict`): the scorer
must have rescored enough of the AR server's own outputs for its agreement to say anything (over
fewer tokens than `MIN_AGREEMENT_TOKENS`, none where the AR scores' positions were emptied, the
verdict is `unproven`, saying so); a point whose samples could not all be scored stays pending;
beside coupling the scored verdict decides only where it finds a violation. Pure: score rows
and columns in, verdicts and columns out."""

from __future__ import annotations

from typing import Any

from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.scored.agreement import MIN_AGREEMENT_TOKENS
from sweeper.proof.scored.judge import control
from sweeper.proof.scored.verdict import (
    at_measurement,
    judged,
    merge,
    pending,
    settled,
    unscorable,
)
from sweeper.results.scores import SELF
from sweeper.spec import DeterminismSpec
from tests.sweeper.proof.scored.scored_data import records, target

POLICY = DeterminismSpec()
SCORER = "ar-cg0-rs1"
LOGITS = target(4, 24, 64, seed=1)
OWN = records(LOGITS, 32, role="control", point_id="ar", seed=1)
CONTROL = control(OWN, POLICY)
# Seed 5: a draw whose p-value stands well above alpha (seed 0's sits near it).
SAMPLES = records(LOGITS, 32, point_id="spec", seed=5)
#: A few samples of a smaller target, for what needs a judged verdict but not its power.
FEW = records(target(1, 8, 16, seed=2), 4, point_id="spec", seed=5)


def _rescored(ar_positions: int | None, scorer: str = SCORER) -> list[dict[str, Any]]:
    """The AR point's own scores keeping `ar_positions` positions each (None: all), and the
    same outputs as `scorer` rescored them."""
    trimmed = [{**r, "positions": r["positions"][:ar_positions]} for r in OWN]
    return [*trimmed, *({**r, "scorer": scorer} for r in trimmed)]


def _judged(ar_positions: int | None) -> tuple[SampledVerdict, dict[str, Any]]:
    """A speculative point's verdict, its samples (correctly drawn) scored by `SCORER`."""
    tests = [{**r, "scorer": SCORER} for r in SAMPLES]
    return judged(
        tests,
        _rescored(ar_positions),
        scorer=SCORER,
        label=SCORER,
        control_point=CONTROL,
        policy=POLICY,
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


def test_outputs_all_scored_by_their_ar_twin_need_no_agreement() -> None:
    """Every output carries its AR twin's own score: no other server scored, so there is no
    scoring path to agree with the AR's; one output scored by the point's own server brings
    the agreement back."""
    twins = [{**r, "scorer": "ar-cg0", "twin_of": "ar"} for r in SAMPLES]
    kw: dict[str, Any] = {"scorer": SCORER, "label": SELF, "control_point": CONTROL}
    verdict, columns = judged(twins, _rescored(0), policy=POLICY, **kw)
    assert verdict.verdict == "distribution-ok", verdict.detail
    n = len(SAMPLES)
    assert f"({n} of {n} outputs identical to their AR twin's: its scores)" in verdict.detail
    assert columns["scored_detail"] == verdict.detail
    own = [{**SAMPLES[0], "scorer": SELF}, *twins[1:]]
    verdict, _ = judged(own, _rescored(0), policy=POLICY, **kw)
    assert verdict.verdict == "unproven" and "agreement over 0 tokens" in verdict.detail


def test_a_sampler_hot_on_both_paths_is_never_passed_on_the_twins_scores() -> None:
    """A fault the speculative path shares with the AR it is coupled to (both sample hotter than
    asked) leaves every output token-identical to its twin. Taking the twin's scores judges
    exactly as scoring the same tokens again would: never a pass (the AR's own samples fail the
    same test, so the point is unproven, saying so)."""
    hot = records(LOGITS, 32, role="control", point_id="ar", seed=3, drawn_as={"temperature": 1.1})
    kw: dict[str, Any] = {"label": SELF, "control_point": control(hot, POLICY), "policy": POLICY}
    twins = [{**r, "role": "test", "scorer": "ar-cg0", "twin_of": "ar"} for r in hot]
    verdict, _ = judged(twins, [], scorer=SCORER, **kw)
    rescored = [{**r, "role": "test", "scorer": SELF} for r in hot]
    again, _ = judged(rescored, _rescored(None, SELF), scorer=SELF, **kw)
    assert verdict.verdict == again.verdict == "unproven"
    assert "the AR server's own samples fail the same test" in verdict.detail


def test_samples_not_all_scored_leave_the_point_pending() -> None:
    failed = {**SAMPLES[0], "error": "connection refused", "positions": []}
    rows = [failed, *SAMPLES[1:]]
    reason = f"1 of {len(rows)} samples: connection refused"
    why = f"its samples could not be scored yet ({reason}); `sweeper run --resume` scores them"
    line = {
        "scored_detail": why,
        "scored_pending": True,
        "determinism": "unproven",
        "sampled_detail": why,
        "unproven_reason": why,
    }
    assert pending(reason) == line
    kw: dict[str, Any] = {"scorer": "b2-cg0", "control_point": CONTROL, "policy": POLICY}
    assert settled(rows, _rescored(None, "b2-cg0"), label=SELF, **kw) == line
    verdict, columns = at_measurement("scored", rows, _rescored(None, "b2-cg0"), **kw)
    assert verdict == SampledVerdict("unproven", why)
    assert columns == {"scored_pending": True, "scored_by": SELF, "scored_detail": why}
    # All scored: settled with its verdict (too few samples to prove anything), pending no more.
    done = settled(FEW, _rescored(None), label="ar-cg0", **{**kw, "scorer": SCORER})
    assert (done["determinism"], done["scored_pending"]) == ("unproven", False)
    assert done["unproven_reason"] == done["sampled_detail"] == done["scored_detail"]
    assert done["scored_by"] == "ar-cg0"


def test_beside_coupling_the_scored_verdict_decides_only_a_violation() -> None:
    kw: dict[str, Any] = {"scorer": "b2-cg0", "control_point": CONTROL, "policy": POLICY}
    verdict, columns = at_measurement("coupled", FEW, _rescored(None, "b2-cg0"), **kw)
    assert verdict is None and columns["scored_verdict"] == "unproven"
    assert unscorable("coupled", "scoring: none", ar=False)[0] is None
    assert unscorable("scored", "scoring: none", ar=True)[0] is None  # the control only
    why = "this server does not score its outputs (scoring: none)"
    assert unscorable("scored", "scoring: none", ar=False) == (
        SampledVerdict("unproven", why),
        {"scored_detail": why},
    )
    found = "token 7 has probability 0"
    coupled = {"determinism": "exact", "sampled_detail": "", "scored_verdict": None}
    scored = {"scored_verdict": "impossible-token", "scored_detail": found}
    merged = merge(coupled, scored)
    assert merged["determinism"] == "impossible-token"
    assert merged["sampled_detail"] == f"scored beside coupling: {found}"
    # A clean scored verdict changes nothing; nor does one beside a violation already seen.
    assert merge(coupled, {"scored_verdict": "distribution-ok"})["determinism"] == "exact"
    diverged = {**coupled, "determinism": "diverged"}
    assert merge(diverged, scored)["determinism"] == "diverged"
