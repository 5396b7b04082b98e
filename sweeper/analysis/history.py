"""A finished run's rows for the history database (`sweeper.results.history`), and the one way
runs get there: `record_run` (the end of `sweeper run`, `nightly`, `history import`).

A run's points are read as `compare` reads them (`compare.run_frames`: calibrated verdicts; per
dataset where the workload names datasets) and keyed as it keys them (`identity_columns`):
one history row per config key, its restarts collapsed into their mean (`collapse_restarts`)
with its noise interval as compare judges it: over 2+ restarts their 95% interval, else twice
the per-request standard error around the value (`request_noise`, `NOISE_SIGMAS`). So a series
read from the history carries the same noise a pairwise comparison would have used.

Only a finished run (manifest `complete`) is recorded, and only whole: a run whose manifest or
records are damaged is refused with what is wrong (`DamagedRun`), never half written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from sweeper.analysis.compare import (
    METRICS,
    NOISE_SIGMAS,
    config_keys,
    identity_columns,
    request_noise,
    run_frames,
)
from sweeper.analysis.datasets import dataset_points, dataset_requests, has_datasets
from sweeper.analysis.objective import Interval
from sweeper.analysis.restart_noise import collapse_restarts
from sweeper.config.columns import is_missing
from sweeper.results.history import (
    COLUMN_TYPES,
    IDENTITY,
    INTERVAL_METRICS,
    SUMMARY_COLUMNS,
    HistoryError,
    shown,
    write_run,
)
from sweeper.results.reader import MANIFEST, Run
from sweeper.results.recover import damage_said
from sweeper.results.repair import RecoveredRun, repaired

assert tuple(METRICS) == INTERVAL_METRICS, "the history's intervals are compare's metrics"
#: The summary's numbers, averaged over a config's restarts.
AVERAGED = tuple(c for c in SUMMARY_COLUMNS if COLUMN_TYPES[c] == "DOUBLE PRECISION")
#: What a dataset point shares with its whole point: the host's and the client's flags.
POINT_FLAGS = tuple(c for c in SUMMARY_COLUMNS if COLUMN_TYPES[c] == "BOOLEAN")


class DamagedRun(ValueError):
    """A run the history cannot take whole; the message says what is damaged."""


class UnfinishedRun(ValueError):
    """A run that did not complete (running, failed, interrupted): not history yet."""


def history_rows(run: Run) -> list[dict[str, Any]]:
    """The run's history rows (`sweeper.results.history.HISTORY_COLUMNS`, less the sweep and
    run id the writer adds). Raises `UnfinishedRun`, or `DamagedRun` naming the damage."""
    manifest = run.manifest
    if manifest is None:
        raise DamagedRun(f"{MANIFEST} is unreadable")
    if manifest.status != "complete":
        raise UnfinishedRun(f"the run is {manifest.status}, not complete")
    run = repaired(run)
    if isinstance(run, RecoveredRun) and (run.recovery.damaged or run.recovery.lost):
        lost = [f"{line.file} line {line.line}" for line in run.recovery.lost]
        raise DamagedRun(damage_said(run.recovery.damaged) or f"lost records: {', '.join(lost)}")
    if run.settled_damage:
        raise DamagedRun(run.settled_damage[0])
    if run.points is None:
        if manifest.points_done:
            raise DamagedRun(f"none of its {manifest.points_done} points can be read")
        return []
    points, requests = run_frames(run)
    whole = points.assign(point_id=points["point_id"].astype(str)).set_index("point_id")
    if has_datasets(requests):
        points, requests = dataset_points(points, requests), dataset_requests(requests)
    try:
        keys = config_keys(points, identity_columns(points))
        collapsed, spread = collapse_restarts(points, keys, AVERAGED)
    except (KeyError, ValueError, TypeError) as exc:
        raise DamagedRun(f"its points cannot be read as configs: {exc}") from None
    restarts = keys.value_counts()
    noise = request_noise(requests)
    run_columns = {
        "run_time": manifest.started_at or manifest.created_at,
        "runtime_commit": manifest.runtime_commit,
        "runtime_source_hash": manifest.runtime_source_hash,
    }
    rows = []
    for index, point in collapsed.iterrows():  # the kept restart's index: its key's
        pid = str(point["point_id"])
        # A dataset point (`<point id>/<dataset>`) takes what it lacks from its point's row.
        parent = whole.loc[pid.rpartition("/")[0]] if pid not in whole.index else whole.loc[pid]
        row = {c: point.get(c) for c in SUMMARY_COLUMNS}
        row.update({c: _first(point, parent, c) for c in (*IDENTITY, *POINT_FLAGS)})
        row["point_id"] = pid
        host = manifest.hosts.get(str(row.get("host")))
        row.update(
            run_columns,
            engine_build=host.runtime_version if host else None,
            engine_commit=host.reported_source_hash if host else None,
            restarts=int(restarts[keys[index]]),
        )
        row.update(_intervals(row, spread.get(pid, {}), noise, pid))
        rows.append(row)
    return rows


def _first(point: pd.Series, parent: pd.Series, column: str) -> Any:
    value = point.get(column)
    return parent.get(column) if column not in point or is_missing(value) else value


def _intervals(
    row: Mapping[str, Any], spread: Mapping[str, Interval], noise: pd.DataFrame, pid: str
) -> dict[str, Any]:
    """Each compared metric's interval bounds and where they came from (see the docstring)."""
    out: dict[str, Any] = {"noise_source": "restarts" if spread else None}
    for metric in INTERVAL_METRICS:
        interval = spread.get(metric)
        value = row.get(metric)
        low: float | None = None
        high: float | None = None
        if interval is not None:
            low, high = interval.low, interval.high
        elif value is not None and not is_missing(value) and pid in noise.index and metric in noise:
            number = float(value)
            half = NOISE_SIGMAS * float(noise.loc[pid, metric]) * abs(number)
            low, high = number - half, number + half
            out["noise_source"] = out["noise_source"] or "requests"
        out[f"{metric}_low"], out[f"{metric}_high"] = low, high
    return out


def record_run(url: str, run: Run) -> int:
    """Write a finished run into the history at `url`, replacing any earlier copy of it; the
    number of rows written. Raises as `history_rows` does, or `HistoryError`."""
    rows = history_rows(run)
    assert run.manifest is not None  # history_rows refused a run without one
    return write_run(url, run.manifest.sweep, run.manifest.run_id, rows)


def record_finished(url: str, run: Run) -> tuple[bool, str] | None:
    """Record a run that has just ended, as `sweeper run` and `nightly` do: whether it was
    written, and one line saying where, or why not (a damaged run, an unreachable database);
    None for a run that did not complete (recorded when a resume completes it)."""
    try:
        written = record_run(url, run)
    except UnfinishedRun:
        return None
    except (DamagedRun, HistoryError) as exc:
        return False, f"history not written ({run.dir.name}): {exc}"
    return True, f"history: {written} point(s) of run {run.dir.name} in {shown(url)}"
