"""The follow-up of a diagnosis: the experiments a grid left open, planned as a spec on the run's
own runtime, host and failing prompts; and the evidence table read back from its requests."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.analysis.diagnosis import diagnose
from sweeper.analysis.evidence import evidence
from sweeper.analysis.factors import Condition
from sweeper.plan import build_plan
from sweeper.plan.followup import REPEATS, plan_followup
from sweeper.spec import Spec
from tests.sweeper.analysis.test_diagnosis import grid, padded_breaks


def _spec(concurrency: list[int]) -> Spec:
    return Spec.model_validate(
        {
            "name": "planted",
            "hosts": ["local"],
            "runtime": {"model": "smollm2-135m", "port": 8123},
            "grid": {
                "budget": [4, 16],
                "topk": [1, 4],
                "block_size": [8],
                "cuda_graph": [True, False],
            },
            "workload": {
                "prompts": [{"id": p, "text": f"prompt {p}"} for p in ("p0", "p1", "p2", "p3")],
                "max_tokens": 32,
                "repeats": 2,
                "concurrency": concurrency,
            },
            "determinism": {"near_tie_margin": 0.05},
        }
    )


def test_a_confounded_grid_plans_every_separating_experiment() -> None:
    rows = grid(padded_breaks, concurrency=(1,))  # padding moved with cuda_graph: confounded
    followup = plan_followup(_spec([1]), diagnose(rows), rows)
    names = [e.name for e in followup.experiments]
    assert names == ["batching", "cuda graph", "no padding"]  # topk varied: branching cleared
    assert followup.skipped[0].startswith("chain: the run already settled it")
    focus = followup.focus
    assert focus["cuda_graph"] and focus["verdict"] == "diverged"
    batching, graph, no_padding = followup.experiments
    assert [a.concurrency for a in batching.arms] == [1, 2]  # the run had batch 1 only
    assert [a.params["cuda_graph"] for a in graph.arms] == [False, True]
    full, padded = no_padding.arms  # both topk-1 chains at the fixed width
    assert full.params["budget"] == 7  # block_size 8: a full draft fills 7 nodes
    assert padded.params["budget"] == focus["budget"] and padded.params["topk"] == 1
    assert followup.prompts == ("p0", "p1")  # failing prompts of the focus, at most two
    spec = followup.spec
    assert spec is not None and spec.name == "planted-followup"
    assert spec.runtime == _spec([1]).runtime and spec.determinism == _spec([1]).determinism
    assert [p.id for p in spec.workload.prompts] == [
        "p0",
        "p1",
    ] and spec.workload.repeats == REPEATS
    plan = build_plan(spec)
    arms = {(a.label) for e in followup.experiments for a in e.arms}
    measured = {
        (tuple(sorted(p.server_config.params.items())), p.request_config.concurrency)
        for p in plan.points()
        if p.server_config.mode == "speculative"
    }
    assert len(measured) == len(arms)  # every arm once, shared arms not twice
    assert any(p.server_config.mode == "ar" for p in plan.points())  # judged against AR


def test_what_the_grid_settled_is_not_planned_again() -> None:
    # Every speculative request breaks: batching and cuda graphs are cleared by the grid itself.
    rows = grid(lambda row: "garbled", ar=True)
    d = diagnose(rows)
    assert d.status_of("concurrency") == d.status_of("cuda_graph") == "cleared"
    followup = plan_followup(_spec([1, 4]), d, rows)
    # Nothing left open but speculation itself: the focus, repeated, to see it reproduce.
    assert [e.name for e in followup.experiments] == ["repeats"]
    assert [s.split(":")[0] for s in followup.skipped] == [
        "batching",
        "cuda graph",
        "chain",
        "no padding",
    ]
    assert all("already settled" in s for s in followup.skipped)


def test_a_separable_run_plans_only_the_padding_confirmation() -> None:
    rows = grid(padded_breaks)  # concurrency 1 and 4: padding separable from cuda_graph
    d = diagnose(rows)
    assert d.status_of("padded_rounds") == "implicated"
    followup = plan_followup(_spec([1, 4]), d, rows)
    assert [e.name for e in followup.experiments] == ["no padding"]


def test_no_violations_nothing_to_follow_up_and_a_bad_point_is_refused() -> None:
    rows = grid(lambda row: "exact")
    followup = plan_followup(_spec([1, 4]), diagnose(rows), rows)
    assert followup.spec is None and followup.skipped == ("no violations: nothing to follow up",)
    with pytest.raises(ValueError, match="no request of point"):
        plan_followup(_spec([1, 4]), diagnose(rows), rows, point="nope")


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
