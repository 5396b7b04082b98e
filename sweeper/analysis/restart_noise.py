"""Restarts in a comparison: a config measured K times (`repeats.restarts`) is one row, its
numbers the means over its restarts, with their 95% intervals (`objective.Interval`).

A cold start moves a config's numbers more than the spread of one restart's requests shows
(vllm#53436: temperature-0 speculative throughput with a 19.65% CV at concurrency 2; vllm#39903:
distinct regimes after restarts). So where both runs hold 2+ restarts of a config, `compare`
calls a change whose intervals overlap "within noise", never a regression or an improvement, as
`best` names no winner inside them. A restart that failed fails the row; one that broke
determinism breaks it (the same server); else one not proven (unjudged, a damaged record) leaves
it not proven.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from sweeper.analysis.objective import Interval
from sweeper.proof.verdicts import STANDINGS, standing

#: point_id of the kept row (the first restart's) -> metric -> its interval over restarts.
Spread = dict[str, dict[str, Interval]]


def collapse_restarts(
    points: pd.DataFrame, keys: pd.Series, metrics: Iterable[str]
) -> tuple[pd.DataFrame, Spread]:
    """One row per config key: the first restart's row with each metric's mean over the ok
    restarts, and the intervals of configs with 2+ restarts; a run without restarts as it is."""
    if points.empty or "restart" not in points or not (points["restart"].fillna(0) > 0).any():
        return points, {}
    groups: dict[Any, list[Any]] = {}
    for index, key in keys.items():
        groups.setdefault(key, []).append(index)
    rows, spread = [], {}
    for indices in groups.values():
        group = points.loc[indices]
        restarts = group["restart"].fillna(0).astype(int)
        if len(group) < 2 or restarts.nunique() != len(group):
            # one restart, or one restart twice (matching refuses that with its reason)
            rows += [row for _, row in group.iterrows()]
            continue
        row, intervals = _collapsed(group.loc[restarts.sort_values().index], metrics)
        rows.append(row)
        if intervals:
            spread[str(row.get("point_id"))] = intervals
    return pd.DataFrame(rows), spread


def _collapsed(
    group: pd.DataFrame, metrics: Iterable[str]
) -> tuple[pd.Series, dict[str, Interval]]:
    row = group.iloc[0].copy()
    statuses = group["status"].astype(str) if "status" in group else pd.Series(["ok"] * len(group))
    ok = group[statuses.to_numpy() == "ok"]
    intervals = {}
    for metric in metrics:
        if metric not in group:
            continue
        values = [v for v in (_num(x) for x in ok[metric]) if v is not None]
        row[metric] = statistics.fmean(values) if values else math.nan
        if len(values) >= 2:
            intervals[metric] = Interval.of(values)
    failed = [s for s in statuses if s != "ok"]
    if failed:
        row["status"] = failed[0]
    if "determinism" in group:
        # The restart that needs the most attention speaks for the config (a violation, else a
        # damaged record, else an unjudged one): a clean restart never hides the others.
        rank = {name: i for i, name in enumerate(STANDINGS)}
        values = list(group["determinism"])
        row["determinism"] = max(values, key=lambda v: rank[standing(v)])
    return row, intervals


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def relative_noise(a: Interval, b: Interval) -> float:
    """The two intervals' half-widths relative to their means, combined: the `noise ±` column."""
    return math.hypot(_half(a), _half(b))


def _half(interval: Interval) -> float:
    if interval.high is None or not interval.mean:
        return 0.0
    return abs(interval.high - interval.mean) / abs(interval.mean)


def spread_of(spread: Spread, row: Mapping[str, Any] | None) -> dict[str, Interval]:
    """A kept row's intervals ({} without restarts)."""
    return {} if row is None else spread.get(str(row.get("point_id")), {})
