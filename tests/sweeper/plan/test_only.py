"""`only:` cuts a plan down to the named points, every restart of them and the points they are
compared with (the AR exactness and speed baselines, the point whose samples they share), with
the ids and baselines of the full plan; an unknown id is a PlanError on `only` naming it, an
empty list changes nothing; `first_restart_label` drops a trailing `rs<n>` and nothing else."""

from __future__ import annotations

import pytest

from sweeper.config import first_restart_label
from sweeper.plan import Plan, PlanError, build_plan
from sweeper.spec import parse_spec
from tests.sweeper.plan.test_sampling import SAMPLED_GRID, VLLM
from tests.sweeper.plan.test_sampling import WORKLOAD as SAMPLED_WORKLOAD
from tests.sweeper.plan.test_speed_baseline import SPEC as SPEED_SPEC

WORKLOAD = "workload:\n  prompts: [{id: a, text: hi}, {id: b, text: ho}]\n"
GRID = (
    "grid: {budget: [8, 16], topk: [4], block_size: [4], temperature: [0, 0.7]}\n"
    "baseline: true\n"
    "repeats: {restarts: 2}\n"
)
NAMED = "local-b16-k4-bs4-cg0-t0-c1"


def plan_of(extra: str = "", body: str = GRID, workload: str = WORKLOAD) -> Plan:
    return build_plan(parse_spec("name: t\n" + body + extra + workload))


def ids(plan: Plan) -> list[str]:
    return [p.point_id for p in plan.points()]


def assert_closed(plan: Plan) -> None:
    """Every point a kept point is compared with, or takes samples from, is in the plan."""
    kept = set(ids(plan))
    for point in plan.points():
        for need in (point.baseline_point_id, point.speed_baseline_point_id, point.samples_from):
            assert need is None or need in kept, f"{point.point_id} needs {need}"


def test_only_keeps_the_points_restarts_and_the_ar_points_they_compare_with() -> None:
    full, cut = plan_of(), plan_of(f"only: [{NAMED}]\n")
    assert len(ids(full)) == 12  # (2 AR + 2 x 2 speculative) x 2 restarts
    assert ids(cut) == [
        "local-ar-cg0-t0-c1",
        NAMED,
        "local-ar-cg0-rs1-t0-c1",
        "local-b16-k4-bs4-cg0-rs1-t0-c1",
    ]
    speculative = [p for p in cut.points() if p.server_config.mode == "speculative"]
    assert len(speculative) == 2
    for point in speculative:
        assert point.baseline_point_id in ids(cut)
    assert_closed(cut)
    # The cut keeps what the full plan says of each kept point: ids, baselines, restarts.
    before = {p.point_id: (p.baseline_point_id, p.server_config.label) for p in full.points()}
    after = {p.point_id: (p.baseline_point_id, p.server_config.label) for p in cut.points()}
    assert after == {k: before[k] for k in after}
    assert cut.restarts == 4
    assert "only: 1 named point(s) and the AR points they compare with" in cut.notes


def test_several_names_and_repeats_of_one_name() -> None:
    cut = plan_of(f"only: [{NAMED}, local-b8-k4-bs4-cg0-t0.7-c1, {NAMED}]\n")
    assert sorted(ids(cut)) == sorted(
        f"local-{label}-{rc}"
        for rs in ("", "-rs1")
        for label, rc in (
            (f"ar-cg0{rs}", "t0-c1"),
            (f"ar-cg0{rs}", "t0.7-c1"),
            (f"b16-k4-bs4-cg0{rs}", "t0-c1"),
            (f"b8-k4-bs4-cg0{rs}", "t0.7-c1"),
        )
    )
    assert_closed(cut)


def test_naming_an_ar_point_keeps_only_it_and_its_restarts() -> None:
    assert ids(plan_of("only: [local-ar-cg0-t0.7-c1]\n")) == [
        "local-ar-cg0-t0.7-c1",
        "local-ar-cg0-rs1-t0.7-c1",
    ]


def test_an_unknown_id_is_a_plan_error_on_only_naming_it() -> None:
    with pytest.raises(PlanError) as raised:
        plan_of(f"only: [{NAMED}, local-b32-k4-bs4-cg0-t0-c1]\n")
    assert raised.value.field == "only"
    message = str(raised.value)
    assert "local-b32-k4-bs4-cg0-t0-c1" in message
    assert f"no point {NAMED}" not in message  # only the unknown one is blamed
    assert NAMED in message  # among the ids the plan does hold


def test_an_empty_only_changes_nothing() -> None:
    full, empty = plan_of(), plan_of("only: []\n")
    assert ids(empty) == ids(full)
    assert empty.notes == full.notes


def test_only_keeps_the_speed_baseline_on_the_named_points_host() -> None:
    spec = parse_spec(SPEED_SPEC + "only: [a-b16-k4-bs16-cg0-t0-c1]\n")
    cut = build_plan(spec)
    assert [h.name for h in cut.hosts] == ["a"]  # host b holds nothing named
    assert ids(cut) == ["a-ar-cg0-t0-c1", "a-ar-speed-cg0-t0-c1", "a-b16-k4-bs16-cg0-t0-c1"]
    (point,) = (p for p in cut.points() if p.server_config.mode == "speculative")
    assert point.baseline_point_id == "a-ar-cg0-t0-c1"
    assert point.speed_baseline_point_id == "a-ar-speed-cg0-t0-c1"


def test_only_keeps_the_point_whose_samples_the_named_one_shares() -> None:
    body = VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n"
    full = plan_of("", body, SAMPLED_WORKLOAD)
    named = "local-b2-cg0-t0.7-c4"
    (source,) = (p.samples_from for p in full.points() if p.point_id == named)
    assert source == "local-b2-cg0-t0.7-c1"
    cut = plan_of(f"only: [{named}]\n", body, SAMPLED_WORKLOAD)
    (point,) = (p for p in cut.points() if p.point_id == named)
    assert point.samples_from == source
    assert point.baseline_point_id == "local-ar-cg0-t0.7-c4"
    assert {source, "local-ar-cg0-t0.7-c4"} <= set(ids(cut))
    # What a kept point needs is kept in turn: the sample source's own AR baseline, and the
    # AR point whose samples the named point's baseline shares; each as in the full plan.
    assert_closed(cut)
    whole = {p.point_id: p for p in full.points()}
    for point in cut.points():
        assert point == whole[point.point_id]


def test_a_restarts_own_id_keeps_that_restart() -> None:
    cut = plan_of("only: [local-b16-k4-bs4-cg0-rs1-t0-c1]\n")
    assert "local-b16-k4-bs4-cg0-rs1-t0-c1" in ids(cut)
    assert "local-b16-k4-bs4-cg0-t0-c1" not in ids(cut)
    assert_closed(cut)


@pytest.mark.parametrize(
    ("label", "first"),
    [
        ("b16-k4-bs4-cg0-rs1", "b16-k4-bs4-cg0"),
        ("b16-k4-bs4-cg0", "b16-k4-bs4-cg0"),
        ("ar-cg0-rs12", "ar-cg0"),
        ("ar-speed-cg1-rs3", "ar-speed-cg1"),
        ("rs1", "rs1"),  # nothing before it: not a restart suffix
        ("b8-rs", "b8-rs"),  # no number
        ("b8-rsx", "b8-rsx"),
        ("b8-rs1-cg0", "b8-rs1-cg0"),  # not the last part
    ],
)
def test_first_restart_label_drops_only_a_trailing_restart(label: str, first: str) -> None:
    assert first_restart_label(label) == first
