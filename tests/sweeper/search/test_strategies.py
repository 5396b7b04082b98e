"""The strategies on a synthetic landscape, no server: grid order, a seeded random order,
successive halving's rungs, and a TPE study that finds the best feasible config without ever
counting the fast-but-wrong one; the plan's restarts and the dry run's preview."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweeper.analysis.objective import Interval, Score
from sweeper.plan import Step, build_plan
from sweeper.search import plan_problems, preview
from sweeper.search.space import Space
from sweeper.search.strategies import Halving, InOrder, make_strategy
from sweeper.spec import parse_spec
from sweeper.spec.search import SearchSpec

SPEC = """
name: s
runtime: {{model: tiny-random}}
grid: {{budget: [2, 4, 8, 16, 32], topk: [1, 2, 4], block_size: [4, 8]}}
workload: {{prompts: [{{id: p, text: hi}}], concurrency: [1, 2]}}
{extra}
"""


def _plan(extra: str = "") -> Any:
    return build_plan(parse_spec(SPEC.format(extra=extra)))


def _landscape(step: Step) -> Score:
    """Best feasible at b16 k2 bs8; b8 k4 (any block size) is faster and wrong."""
    p = step.server_config.params
    value = 100 - abs(p["budget"] - 16) - 10 * abs(p["topk"] - 2) - (8 - p["block_size"])
    if p["budget"] == 8 and p["topk"] == 4:
        return Score("infeasible", "determinism diverged", Interval.of([200.0]))
    return Score("ok", "", Interval.of([float(value)]))


def test_grid_and_random_orders() -> None:
    space = Space.of(_plan().hosts[0])
    assert len(space.candidates) == 28 and len(space.baselines) == 1  # topk > budget dropped
    grid = InOrder(space)
    assert [grid.ask() for _ in range(2)] == list(space.candidates[:2])
    shuffled = [InOrder(space, 5).ask() for _ in range(2)]
    assert shuffled[0] == shuffled[1] and InOrder(space, 6).queue != InOrder(space, 5).queue


def test_halving_promotes_the_best_third_on_fresh_restarts() -> None:
    space = Space.of(_plan().hosts[0])
    halving = Halving(space, SearchSpec(strategy="halving", eta=3))
    rungs: dict[int, list[str]] = {}
    while (step := halving.ask()) is not None:
        rungs.setdefault(step.server_config.restart, []).append(step.server_config.label)
        halving.tell(step, _landscape(step))
    assert [len(v) for v in rungs.values()] == [28, 9, 3, 1]  # 26 feasible -> 9 -> 3 -> 1
    assert rungs[3] == ["b16-k2-bs8-cg0-rs3"]


def test_tpe_finds_the_best_feasible_config_in_a_fraction_of_the_grid(tmp_path: Path) -> None:
    space = Space.of(_plan().hosts[0])
    search = SearchSpec(strategy="tpe", seed=0, startup_trials=4)
    tpe = make_strategy(space, search, tmp_path / "study.jsonl", "s")
    seen = []
    for _ in range(12):  # 12 of 28
        step = tpe.ask()
        assert step is not None and step not in seen  # a config is never measured twice
        seen.append(step)
        tpe.tell(step, _landscape(step))
    feasible = [_landscape(s) for s in seen if _landscape(s).state == "ok"]
    best = max(s.value or 0.0 for s in feasible)
    assert best >= 0.95 * 100  # the landscape's best feasible value is 100
    # The study is on disk: a new strategy over the same journal sees every trial.
    again = make_strategy(space, search, tmp_path / "study.jsonl", "s")
    assert len(again.study.trials) >= 12  # type: ignore[attr-defined]


def test_restarts_in_the_plan_and_the_preview() -> None:
    plan = _plan("repeats: {restarts: 2}")
    labels = [s.server_config.label for s in plan.hosts[0].steps]
    assert labels[0] == "ar-cg0" and labels[29] == "ar-cg0-rs1" and labels[30].endswith("-rs1")
    points = {p.point_id: p for p in plan.points()}
    rs1 = points["local-b4-k2-bs8-cg0-rs1-t0-c1"]
    assert rs1.baseline_point_id == "local-ar-cg0-rs1-t0-c1"  # the baseline measured before it
    assert plan.hosts[0].steps[0].server_config.id == _plan().hosts[0].steps[0].server_config.id
    lines = preview(_plan("search: {strategy: tpe, stop: {restarts: 11}, startup_trials: 3}"))
    assert lines[1] == (
        "stop: 11 restarts of the grid's 29 (38%), the AR baseline's restart included"
    )
    first = lines[2].split("candidates: ")[1].removesuffix(" (then by the model)").split(", ")
    assert len(first) == 3 and len(set(first)) == 3
    wrong = _plan("search: {objective: {at: [t0-c1, t0-c8]}}")
    assert plan_problems(wrong) == [
        "search.objective.at[1]: no request config 't0-c8' in the plan (it has t0-c1, t0-c2)"
    ]


def test_halving_lengthens_each_rung_s_measurement_by_eta() -> None:
    from sweeper.measure.drive import point_load
    from sweeper.measure.pool import ClosedLoop

    plan = _plan()
    space = Space.of(plan.hosts[0])
    halving = Halving(space, SearchSpec(strategy="halving", eta=3))
    lengths: dict[int, set[int]] = {}
    while (step := halving.ask()) is not None:
        lengths.setdefault(step.server_config.restart, set()).add(halving.length(step))
        for point in space.points(step, halving.length(step)):
            load = point_load(point.request_config, plan.spec.workload, point.length)
            assert isinstance(load, ClosedLoop) and load.requests == point.length  # 1 prompt
        halving.tell(step, _landscape(step))
    assert lengths == {0: {1}, 1: {3}, 2: {9}, 3: {27}}


def test_a_longer_point_lengthens_an_open_loop_s_duration_or_arrivals() -> None:
    from sweeper.measure.drive import point_load
    from sweeper.measure.pool import OpenLoop

    for load, expected in (("duration_s: 20", (60.0, None)), ("requests: 6", (None, 18))):
        text = (
            f"name: t\nworkload:\n  prompts: [{{id: a, text: hi}}]\n  load: {{rate: [2], {load}}}\n"
        )
        plan = build_plan(parse_spec(text))
        rc = next(plan.points()).request_config
        longer = point_load(rc, plan.spec.workload, 3)
        assert isinstance(longer, OpenLoop)
        assert (longer.profile.duration_s, longer.profile.requests) == expected
