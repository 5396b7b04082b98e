"""The follow-up of a diagnosis: the experiments a grid left open, planned as a spec on the run's
own runtime, host and failing prompts."""

from __future__ import annotations

import pytest

from sweeper.diagnosis.followup import REPEATS, plan_followup
from sweeper.diagnosis.rule import diagnose
from sweeper.plan import build_plan
from sweeper.spec import Spec
from tests.sweeper.diagnosis.test_rule import grid, padded_breaks


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
    (spec,) = followup.specs
    assert spec.name == "planted-followup"
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
    assert followup.specs == () and followup.skipped == ("no violations: nothing to follow up",)
    with pytest.raises(ValueError, match="no request of point"):
        plan_followup(_spec([1, 4]), diagnose(rows), rows, point="nope")
