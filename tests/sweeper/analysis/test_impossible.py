"""Impossible speedups: a closed-loop throughput speedup above the point's tau (beyond its
interval, or by more than the margin measured once) is flagged with its likely cause, and every
judge that ranks speedups withholds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.analysis.best import best_of, rank
from sweeper.analysis.drift import mark_drift
from sweeper.analysis.impossible import (
    IMPOSSIBLE_COLUMNS,
    IMPOSSIBLE_MARGIN,
    UNSEEN_CAUSE,
    impossible_lines,
    impossible_speedups,
    mark_impossible,
)
from sweeper.analysis.objective import score
from sweeper.results.reader import read_run
from sweeper.spec.search import ObjectiveSpec
from tests.sweeper.analysis.test_best import _row as best_row
from tests.sweeper.results_factory import RunShape, make_run

SPEEDUP = ObjectiveSpec(column="speedup")


def _row(
    budget: int | None, speedup: float, tau: float, restart: int = 0, conc: int = 1, **extra: Any
) -> dict[str, Any]:
    """A point row of config b<budget> (None: AR) at t0-c<conc>, one restart of it."""
    return best_row(
        budget,
        10.0 * speedup,
        conc,
        host="local",
        point_id=f"b{budget or 0}-c{conc}-rs{restart}",
        server_label=f"b{budget or 0}-k2-bs4" + (f"-rs{restart}" if restart else ""),
        speedup=None if budget is None else speedup,
        tau=1.0 if budget is None else tau,
        restart=restart,
        **extra,
    )


def test_a_lone_speedup_above_tau_beyond_the_margin_is_flagged_with_its_numbers() -> None:
    # b8 reads 5% above its tau: within the margin a lone ratio is noise, not flagged
    rows = [_row(None, 1.0, 1.0), _row(4, 2.60, 1.93), _row(8, 1.93 * 1.05, 1.93)]
    (found,) = impossible_speedups(rows)
    assert (found.host, found.label, found.at) == ("local", "b4 k2 bs4", "t0-c1")
    assert found.reason == f"speedup 2.60x above tau 1.93: {UNSEEN_CAUSE}"
    marked = mark_impossible(rows)
    assert [r.get("speedup_impossible") for r in marked] == [None, True, None]
    assert marked[1]["speedup_impossible_reason"] == found.reason
    assert "speedup_impossible" not in rows[1]  # copies: the caller's rows stay as they were
    assert set(IMPOSSIBLE_COLUMNS) <= set(marked[1])


def test_a_normal_speedup_and_a_rate_load_are_not_flagged() -> None:
    rows = [_row(4, 1.6, 1.93), _row(4, 1.0, 1.0, conc=2)]
    # an open loop: the two servers hold different numbers of requests in flight
    rows += [_row(8, 5.0, 1.9, request_config_id="t0-r2", rate=2.0, concurrency=None)]
    assert impossible_speedups(rows) == [] and impossible_lines(rows) == []
    assert mark_impossible(rows) == rows


def test_restarts_flag_only_an_interval_wholly_above_tau() -> None:
    straddles = [_row(4, s, 2.0, restart=i) for i, s in enumerate((1.7, 2.3, 2.5))]
    assert impossible_speedups(straddles) == []  # low bound 1.13: below tau 2.0
    above = [_row(4, s, 2.0, restart=i) for i, s in enumerate((2.5, 2.6, 2.7))]
    (found,) = impossible_speedups(above)
    assert found.speedup.n == 3 and found.point_ids == ("b4-c1-rs0", "b4-c1-rs1", "b4-c1-rs2")
    assert found.numbers.startswith("speedup 2.60x (95% CI 2.35-2.85 over 3 restarts)")
    marked = mark_impossible([*above, _row(4, 1.5, 2.0, conc=2)])
    assert [r.get("speedup_impossible") for r in marked] == [True, True, True, None]


@pytest.mark.parametrize(
    ("extra", "cause"),
    [
        ({"baseline_busy": True}, "its AR baseline was measured on a busy host"),
        (
            {"host_busy": True, "host_busy_reason": "others used 1.2 CPUs"},
            "the point itself was measured on a busy host (others used 1.2 CPUs)",
        ),
        ({"baseline_drifted": True, "baseline_drift": 0.3}, "its AR baseline drifted 30%"),
    ],
)
def test_the_cause_is_read_from_the_rows(extra: dict[str, Any], cause: str) -> None:
    (found,) = impossible_speedups([_row(4, 2.6, 1.93, **extra)])
    assert found.cause.startswith(cause) and found.reason.startswith("speedup 2.60x above")


def test_a_drifted_baseline_is_named_once_drift_is_marked() -> None:
    rows = [_row(None, 1.0, 1.0, started_at="2026-12-01T10:00:00Z")]
    rows += [_row(4, 2.6, 1.93, started_at="2026-12-01T10:05:00Z")]
    rows += [_row(None, 0.6, 1.0, restart=1, started_at="2026-12-01T10:09:00Z")]  # a check
    (found,) = impossible_speedups(mark_drift(rows))
    assert found.cause == "its AR baseline drifted 40% over the run"
    (unmarked,) = impossible_speedups(rows)  # drift unmarked: no evidence, the unseen cause
    assert unmarked.cause == UNSEEN_CAUSE
    (line,) = impossible_lines(rows)  # the closing lines mark the drift themselves
    assert line == (
        "impossible speedups: 1 point(s) have a throughput speedup above their tau "
        "(b4 k2 bs4 t0-c1: 2.60x at tau 1.93): its AR baseline drifted 40% over the run; "
        "their speedups are withheld"
    )


def test_closing_lines_one_per_cause_worst_first() -> None:
    rows = [
        _row(b, 2.0 + b / 10, 1.9, **({"baseline_busy": True} if b > 8 else {}))
        for b in range(4, 16)
    ]
    lines = impossible_lines(rows)
    assert len(lines) == 2
    unseen = next(line for line in lines if UNSEEN_CAUSE in line)
    assert unseen.startswith("impossible speedups: 5 point(s) have a throughput speedup above")
    assert "(b8 k2 bs4 t0-c1: 2.80x at tau 1.90; b7 k2 bs4" in unseen and "; and 1 more)" in unseen
    assert "7 point(s)" in next(line for line in lines if "busy host" in line)


def test_best_and_the_search_score_withhold_an_impossible_speedup_not_throughput() -> None:
    rows = [_row(None, 1.0, 1.0), _row(4, 8.6, 1.93, baseline_busy=True), _row(8, 1.5, 2.2)]
    (level,) = rank(rows, SPEEDUP)
    assert [e.label for e in level.ranked] == ["b8 k2 bs4"]
    (excluded,) = level.excluded
    assert excluded.score.state == "failed"
    assert excluded.score.reason == (
        "withheld: an impossible speedup (above tau): speedup 8.60x above tau 1.93: "
        "its AR baseline was measured on a busy host"
    )
    found = best_of(rows, SPEEDUP)
    assert found is not None and found[0] == "b8 k2 bs4"
    (level,) = rank(rows, ObjectiveSpec())  # its own tok/s stands
    assert level.winner is not None and level.winner.label == "b4 k2 bs4"
    # The score reads the marks: unmarked rows score as before.
    assert score([_row(4, 8.6, 1.93)], SPEEDUP).state == "ok"
    assert score(mark_impossible([_row(4, 8.6, 1.93)]), SPEEDUP).state == "failed"


def test_a_factory_run_with_a_slowed_baseline(tmp_path: Path) -> None:
    # AR at T=0 ran at a third of its speed (a busier moment): every T=0 speedup is above tau.
    shape = RunShape(slow={(0, 0, 0.0, False): 0.3}, cuda_graphs=(False,))
    points = read_run(make_run(tmp_path, shape)).points
    assert points is not None
    rows = points.to_dict("records")
    found = impossible_speedups(rows)
    spec = [r for r in rows if r["mode"] != "ar"]
    assert {(f.label, f.at) for f in found} == {
        (f"b{r['budget']} k{r['topk']} bs8", "t0-c1") for r in spec if r["temperature"] == 0.0
    }
    assert all(f.speedup.mean > f.tau * (1 + IMPOSSIBLE_MARGIN) for f in found)
    assert not any(r["speedup"] > r["tau"] for r in spec if r["temperature"] > 0)
    (line,) = impossible_lines(rows)
    assert line.startswith(f"impossible speedups: {len(found)} point(s)") and UNSEEN_CAUSE in line
