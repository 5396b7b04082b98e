"""Change points over a history: a step named with its commit range, a drift flagged while it
runs, a flat series quiet, a verdict change at its first run, busy and unproven nights unseen."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from sweeper.analysis.changepoints import change_points, new_regressions, tonight
from sweeper.results.history import history_frame, write_run

ROOT = Path(__file__).resolve().parents[3]


def synthetic() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "history_synthetic", ROOT / "bench/history_synthetic.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's names through it
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # 30 nights analysed as 25 nightlies would (seconds)
def test_step_and_drift_found_where_pairwise_compare_misses_them(tmp_path: Path) -> None:
    bench = synthetic()
    plan = bench.Plan(nights=30, restarts=12, step_night=20, drift_night=10)
    got = bench.judge(plan, 0, str(tmp_path / "history.sqlite3"))
    (step,) = got.steps
    assert step.after_run == "night-20" and step.before_run == "night-19"
    assert (step.before_commit, step.after_commit) == (bench.commit(19), bench.commit(20))
    assert f"runtime {bench.commit(19)[:10]}..{bench.commit(20)[:10]}" in step.describe()
    assert -0.05 < step.change < -0.01 and step.regression
    assert got.drift_alarm is not None and got.drift_alarm <= 10 + 15
    assert got.false_alarms == [] and got.flat_final == []
    assert got.pairwise == []  # compare at 5% flags neither, night against night


def night_row(night: int, tok_s: float, **extra: object) -> dict[str, object]:
    """Night `night`'s one history row (runtime commit `cNN000...`)."""
    return {
        "point_id": "p",
        "host": "local",
        "server_config_id": "s1",
        "server_label": "b16-k4-bs8",
        "request_config_id": "t0-c1",
        "runtime_commit": f"c{night:02d}".ljust(40, "0"),
        "run_time": f"2026-10-01T{night:02d}:00:00Z",
        "status": "ok",
        "determinism": "exact",
        "host_busy": False,
        "output_tok_s": tok_s,
        **extra,
    }


def write_nights(tmp_path: Path, nights: list[dict[str, object]]) -> pd.DataFrame:
    """Each row a run (`run-NN`) of sweep `nightly`, written to `tmp_path/h.sqlite3` by the
    history's writer; the history read back."""
    url = str(tmp_path / "h.sqlite3")
    for i, row in enumerate(nights):
        write_run(url, "nightly", f"run-{i:02d}", [row])
    return history_frame(url)


def test_verdict_change_at_its_first_run_and_busy_unproven_nights_unseen(tmp_path: Path) -> None:
    level = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.1, 10.0, 10.2, 9.9, 10.0, 10.1]
    rows = [night_row(i, v) for i, v in enumerate(level)]
    rows[4] = night_row(4, 6.0, host_busy=True)  # a busy night's collapse is no step
    rows[7] = night_row(7, 5.0, determinism="unproven")  # nor an unproven night's
    rows[9] = night_row(9, 10.0, determinism="diverged")
    rows[10] = night_row(10, 10.0, determinism="diverged")  # the same stretch: one change
    found = change_points(write_nights(tmp_path, rows))
    assert [(c.kind, c.before_run, c.after_run) for c in found] == [("verdict", "run-08", "run-09")]
    (verdict,) = found
    assert verdict.regression and verdict.verdicts == ("exact", "diverged")
    assert verdict.commit_range == "c080000000..c090000000"


def test_an_alarm_is_raised_once_though_its_step_moves_a_night(tmp_path: Path) -> None:
    level = [10.0, 10.1, 9.9, 10.0, 10.1, 9.9, 10.0, 10.1, 9.0, 9.1, 8.9, 9.0, 9.1]
    frame = write_nights(tmp_path, [night_row(i, v) for i, v in enumerate(level)])
    runs = list(dict.fromkeys(frame["run_id"]))
    earlier = change_points(frame[frame["run_id"].isin(runs[:11])])
    now = change_points(frame)
    assert [c.after_run for c in now if c.kind == "step"] == ["run-08"]
    assert [c.after_run for c in new_regressions([], now, runs)] == ["run-08"]
    assert new_regressions(earlier, now, runs) == []


def test_the_nightly_raises_a_step_once_on_the_night_it_is_first_found(tmp_path: Path) -> None:
    level = [10.0, 10.1, 9.9, 10.0, 10.1, 9.9, 10.0, 10.1, 9.0, 9.1, 8.9, 9.0, 9.1, 8.9]
    frame = write_nights(tmp_path, [night_row(i, v) for i, v in enumerate(level)])
    raised = []
    for i in range(len(level)):
        seen = frame[frame["run_id"].isin([f"run-{n:02d}" for n in range(i + 1)])]
        raised += [(i, c.after_run) for c in tonight(seen, "nightly", f"run-{i:02d}")]
    assert raised == [(10, "run-08")]  # three nights after the step: MIN_SEGMENT
    assert tonight(frame, "another sweep", "run-13") == []
