"""The evidence table of a follow-up, read back from its requests: which arm breaks, and an arm
that still hit the rule does not clear what it varies."""

from __future__ import annotations

from typing import Any

from sweeper.diagnosis.evidence import evidence
from sweeper.diagnosis.factors import Condition
from sweeper.diagnosis.followup import plan_followup
from sweeper.diagnosis.rule import diagnose
from tests.sweeper.diagnosis.test_followup import _spec
from tests.sweeper.diagnosis.test_rule import grid, padded_breaks


def test_evidence_says_which_arm_breaks() -> None:
    rows = grid(padded_breaks, concurrency=(1,))
    followup = plan_followup(_spec([1]), diagnose(rows), rows)

    def follow_row(arm: Any, prompt: str, padded: bool) -> dict[str, Any]:
        return {
            "mode": "speculative",
            **arm.params,
            "concurrency": arm.concurrency,
            "prompt_id": prompt,
            "verdict": "diverged" if padded else "exact",
            "padded_rounds": 3 if padded else 0,
            "batched_rounds": 0,
            "max_verify_width": 1 + arm.params["budget"],
        }

    no_padding = next(e for e in followup.experiments if e.name == "no padding")
    full, padded_chain = no_padding.arms
    measured = [follow_row(full, "p0", False), follow_row(padded_chain, "p0", True)]
    table = evidence((no_padding,), measured)
    assert [r["broken/judged"] for r in table] == ["0/1", "1/1"]
    assert table[0]["padded"] == "0/1" and table[1]["padded"] == "1/1"
    assert table[0]["shows"] == f"separates: breaks only at {padded_chain.label}"
    graph = next(e for e in followup.experiments if e.name == "cuda graph")
    assert {r["shows"] for r in evidence((graph,), measured)} == {"not measured"}


def test_an_arm_that_still_hit_the_rule_does_not_clear_it() -> None:
    # The chain meant to fill its verify drafted less once and padded: that request broke, the
    # unpadded one did not. Both arms break, but only where padding was: not "cleared".
    rows = grid(padded_breaks, concurrency=(1,))
    d = diagnose(rows)
    followup = plan_followup(_spec([1]), d, rows)
    no_padding = next(e for e in followup.experiments if e.name == "no padding")
    full, padded_chain = no_padding.arms

    def row(arm: Any, padded: bool) -> dict[str, Any]:
        verdict = "diverged" if padded else "exact"
        return {"mode": "speculative", **arm.params, "concurrency": 1, "verdict": verdict,
                "padded_rounds": 2 if padded else 0}  # fmt: skip

    measured = [row(full, True), row(full, False), row(padded_chain, True)]
    rule = [Condition("padded_rounds", ">", 0, mask=0)]  # the run's rule, as diagnosed
    table = evidence((no_padding,), measured, rule)
    assert [(r["in the rule"], r["outside it"]) for r in table] == [("1/1", "0/1"), ("1/1", "0/0")]
    assert table[0]["shows"] == (
        "both arms break, but only where padded_rounds > 0: 1 of their requests outside it "
        "stayed clean"
    )
    assert evidence((no_padding,), measured)[0]["shows"] == "both arms break: no padding cleared"
