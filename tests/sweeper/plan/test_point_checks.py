"""Every point carries its sampled check from the plan: the check (`determinism.sampled`, `auto`
resolved per engine) at temperature > 0 and None at 0, who scores its sampled outputs (its own
server, the AR scoring restart, or nobody) and the sample roles it draws; decided once when the
plan is built, so a spec changed after planning changes no point's check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweeper.plan import Plan, build_plan
from sweeper.plan.points import Point
from sweeper.spec import Spec, parse_spec

WORKLOAD = "workload: {prompts: [{id: a, text: hi}], concurrency: [1, 4], seed: 7, max_tokens: 8}\n"
TREE = "grid: {budget: [8], topk: [1], temperature: [0, 0.7]}\n"
RUNTIMES = {
    "ddtree_runtime": TREE,
    "vllm": "runtime: {engine: vllm, preset: vllm-ngram, model: m}\n"
    "grid: {budget: [2], temperature: [0, 0.7]}\n",
    "sglang": "runtime: {engine: sglang, preset: sglang-ddtree, model: m}\n" + TREE,
}
#: engine, determinism.sampled -> (the check, who scores a speculative point's sampled outputs,
#: who scores an AR point's, the roles a speculative and an AR point draw).
CASES = {
    ("ddtree_runtime", "auto"): ("coupled", "self", "self", (), ()),
    ("vllm", "auto"): ("scored", "self", "self", ("test",), ("control",)),
    ("sglang", "auto"): ("scored", "ar", "self", ("test",), ("control",)),
    ("vllm", "distribution"): ("distribution", None, None, ("test",), ("ar", "control")),
    ("vllm", "coupled"): ("coupled", "self", "self", (), ()),
    ("sglang", "repeats"): ("repeats", None, None, (), ()),
}


def spec_of(engine: str, asked: str) -> Spec:
    policy = f"determinism: {{sampled: {asked}}}\n"
    return parse_spec("name: t\n" + RUNTIMES[engine] + WORKLOAD + policy)


def checks(plan: Plan) -> dict[str, tuple[object, ...]]:
    return {p.point_id: _carried(p) for p in plan.points()}


def _carried(point: Point) -> tuple[object, ...]:
    return (point.sampled_check, point.scored_by, point.samples, point.samples_from)


@pytest.mark.parametrize(("engine", "asked"), sorted(CASES))
def test_every_point_of_a_plan_carries_its_check(engine: str, asked: str) -> None:
    check, spec_scorer, ar_scorer, spec_roles, ar_roles = CASES[engine, asked]
    plan = build_plan(spec_of(engine, asked))
    points = list(plan.points())
    assert len(points) == 8, [p.point_id for p in points]
    for point in points:
        ar = point.server_config.mode == "ar"
        if point.request_config.temperature == 0:
            assert (point.sampled_check, point.scored_by, point.samples) == (None, None, ())
            continue
        first = point.request_config.concurrency == 1  # the other load shares its samples
        roles = (ar_roles if ar else spec_roles) if first else ()
        scorer = ar_scorer if ar else spec_scorer
        assert (point.sampled_check, point.scored_by, point.samples) == (check, scorer, roles)
    # A scoring restart scores exactly the points that wait for the AR server.
    for host in plan.hosts:
        waiting = [p.point_id for p in host.points() if p.scored_by == "ar"]
        scored = [p.point_id for step in host.steps for p in host.scored_by(step)]
        assert scored == waiting


@pytest.mark.parametrize(("engine", "asked"), [("sglang", "auto"), ("ddtree_runtime", "auto")])
def test_a_spec_changed_after_planning_changes_no_points_check(engine: str, asked: str) -> None:
    plan = build_plan(spec_of(engine, asked))
    before = checks(plan)
    for other in ("distribution", "repeats", "coupled", "scored"):
        changed = spec_of("vllm", other)
        assert checks(replace(plan, spec=changed)) == before, other
