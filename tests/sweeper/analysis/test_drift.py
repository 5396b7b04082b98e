"""The AR baseline's drift: each baseline's measurements in order, first vs last and the largest
change; speculative points against a baseline that moved beyond the limit are marked, and
`best` withholds their speedups (not their throughput)."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.analysis.best import rank
from sweeper.analysis.drift import DRIFT_LIMIT, baseline_drift, drift_line, mark_drift
from sweeper.spec.search import ObjectiveSpec
from tests.sweeper.analysis.test_best import _row as best_row


def _row(budget: int | None, tok_s: float, restart: int, conc: int = 1, **extra: Any) -> dict:
    """test_best's point row, as one restart of a run measured in rounds."""
    return best_row(
        budget,
        tok_s,
        conc,
        point_id=f"local-b{budget or 0}-rs{restart}-c{conc}",
        host="local",
        speedup=None if budget is None else 1.5,
        restart=restart,
        # rounds: the AR of a round is measured first, then that round's configs
        started_at=f"2026-12-01T10:{restart}{0 if budget is None else 5}:00Z",
        **extra,
    )


def _run(ar_c1: list[float], ar_c2: list[float]) -> list[dict[str, Any]]:
    rows = []
    for restart, (c1, c2) in enumerate(zip(ar_c1, ar_c2, strict=True)):
        rows += [_row(None, c1, restart), _row(None, c2, restart, conc=2)]
        rows += [_row(8, 15.0, restart), _row(8, 25.0, restart, conc=2)]
        rows += [_row(16, 16.0 + restart, restart), _row(16, 24.0, restart, conc=2)]
    return rows


def test_drift_per_baseline_first_last_and_largest_change() -> None:
    drifts = baseline_drift(reversed(_run([10.0, 8.5, 9.0], [20.0, 20.4, 19.8])))
    by_at = {d.at: d for d in drifts}
    c1, c2 = by_at["t0-c1"], by_at["t0-c2"]
    assert c1.values == (10.0, 8.5, 9.0)  # measurement order, whatever the rows' order
    assert (c1.first, c1.last, c1.max_drift) == (10.0, 9.0, pytest.approx(0.15))
    assert c1.drifted and not c2.drifted and c2.max_drift == pytest.approx(0.02)
    assert c1.label == "AR" and c1.host == "local"
    line = drift_line(drifts)
    assert line.startswith("AR baseline drift: max 15.0% (local AR t0-c1: first 10, last 9 tok/s")
    assert f"1 beyond {DRIFT_LIMIT:.0%}" in line
    # One measurement per baseline: nothing to see, nothing said.
    assert baseline_drift(_run([10.0], [20.0])) == [] and drift_line([]) == ""


def test_only_points_against_the_drifted_baseline_are_marked() -> None:
    rows = _run([10.0, 8.5, 9.0], [20.0, 20.4, 19.8])
    rows += [_row(8, 15.0, 0, cuda_graph=True)]  # another baseline's (cuda graph on): unmeasured
    marked = mark_drift(rows)
    hit = {r["point_id"] for r in marked if r.get("baseline_drifted")}
    assert hit == {f"local-b{b}-rs{k}-c1" for b in (8, 16) for k in range(3)}
    assert not any(r.get("baseline_drifted") for r in marked if r.get("cuda_graph") is True)
    assert all(r["baseline_drift"] == pytest.approx(0.15) for r in marked if "baseline_drift" in r)


def test_best_withholds_a_lone_speedup_against_a_drifted_baseline_not_throughput() -> None:
    # One restart, its baseline checked twice more after the configs (`baseline_every`).
    rows = [r for r in _run([10.0, 8.5, 9.0], [20.0, 20.4, 19.8]) if r["restart"] == 0]
    rows += [r for r in _run([10.0, 8.5, 9.0], [20.0, 20.4, 19.8]) if r["budget"] is None]
    c1, c2 = rank(rows, ObjectiveSpec(column="speedup"))
    assert c1.ranked == () and {e.score.state for e in c1.excluded} == {"failed"}
    assert all("drifted" in e.score.reason for e in c1.excluded)
    assert len(c2.ranked) == 2  # its baseline held still
    c1, _ = rank(rows, ObjectiveSpec(column="output_tok_s"))
    assert [e.label for e in c1.ranked] == ["b16 k2 bs4", "b8 k2 bs4"]  # rows grouped as before


def test_paired_restarts_carry_the_drift_in_their_interval() -> None:
    rows = _run([10.0, 8.5, 9.0], [20.0, 20.4, 19.8])
    for row in rows:  # each restart's speedup divides by its own round's baseline
        if row["budget"] is not None:
            ar = 10.0 if row["restart"] == 0 else 8.5 if row["restart"] == 1 else 9.0
            row["speedup"] = row["output_tok_s"] / (ar if row["concurrency"] == 1 else 20.0)
    c1, _ = rank(rows, ObjectiveSpec(column="speedup"))
    assert {e.label for e in c1.ranked} == {"b8 k2 bs4", "b16 k2 bs4"}
    assert all(e.score.interval and e.score.interval.n == 3 for e in c1.ranked)
    assert all(
        r.get("baseline_drifted")
        for r in mark_drift(rows)
        if r["point_id"].endswith("c1") and r["budget"] is not None
    )  # still marked in the report
