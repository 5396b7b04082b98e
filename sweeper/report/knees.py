"""The knee table: per config and open-loop request setting, the highest rate at which it meets
the SLO, against the AR baseline's, and its latency speedup at each rate (pure, from point rows).

A series is one server config's open-loop points that differ only in rate (same host,
temperature, top_p, top_k, max_tokens, request features, arrival process, max_concurrency). Its
baseline is the AR series with the same request setting and cuda graph on the same host. Knees
and speedups come from `sweeper.analysis.goodput` (`knee`, `compare_knees`) on the recorded
point columns: goodput, median E2E and median per-request ITL; a client-bound point stops a
knee's scan and gives no speedup. Without an SLO in the spec there are no knees, only the
latency speedups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweeper.analysis.goodput import Knee, KneeComparison, compare_knees, knee, rate_point_of
from sweeper.config import temperature_of
from sweeper.config.features import feature_labels
from sweeper.config.labels import load_label, point_label
from sweeper.config.request import REQUEST_COLUMNS
from sweeper.results.rows import is_missing

#: What a series shares besides its server config: the request config but its load level.
SETTING = tuple(c for c in REQUEST_COLUMNS if c not in ("concurrency", "rate"))


@dataclass(frozen=True)
class KneeRow:
    """One config's series against its baseline series."""

    host: str
    config: str
    #: The request setting the rates share, e.g. `T=0 poisson`.
    setting: str
    mode: str
    rates: tuple[float, ...]
    #: The config's knee against the baseline's (the AR series itself: its own knee only).
    comparison: KneeComparison | None
    knee: Knee | None
    client_bound_rates: tuple[float, ...]


def _key(row: dict[str, Any], names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("-" if is_missing(row.get(n)) else str(row.get(n)) for n in names)


def _setting_label(row: dict[str, Any]) -> str:
    temperature = temperature_of(row)
    shape = load_label(row).split(" ", 1)
    arrival = shape[1] if len(shape) > 1 else "poisson"
    features = "".join(f" {label}" for label in feature_labels(row))
    return f"T={temperature:g}{features} {arrival}"


def knee_rows(points: pd.DataFrame) -> list[KneeRow]:
    """Every open-loop series of ok points, AR first per host and setting (see module doc)."""
    if points.empty or "rate" not in points:
        return []
    open_loop = points[points["rate"].notna() & (points.get("status", "ok") == "ok")]
    if open_loop.empty:
        return []
    names = tuple(n for n in SETTING if n in open_loop)
    series: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in open_loop.to_dict("records"):
        key = (str(row["host"]), *_key(row, names), str(row.get("server_config_id")))
        series.setdefault(key, []).append(row)
    baselines = {
        (rows[0]["host"], _key(rows[0], names), _graph(rows[0])): rows
        for rows in series.values()
        if rows[0].get("mode") == "ar"
    }
    has_slo = "meets_slo" in open_loop and open_loop["meets_slo"].notna().any()
    out = []
    for rows in series.values():
        first = rows[0]
        mine = [rate_point_of(r) for r in rows]
        base_rows = baselines.get((first["host"], _key(first, names), _graph(first)))
        comparison = None
        if first.get("mode") != "ar" and base_rows is not None:
            comparison = compare_knees(mine, [rate_point_of(r) for r in base_rows])
        out.append(
            KneeRow(
                host=str(first["host"]),
                config=point_label(first),
                setting=_setting_label(first),
                mode=str(first.get("mode")),
                rates=tuple(sorted(p.rate for p in mine)),
                comparison=comparison if has_slo or comparison is None else _no_knees(comparison),
                knee=knee(mine) if has_slo else None,
                client_bound_rates=tuple(sorted(p.rate for p in mine if p.client_bound)),
            )
        )
    out.sort(key=lambda r: (r.host, r.setting, r.mode != "ar", r.config))
    return out


def _graph(row: dict[str, Any]) -> bool:
    value = row.get("cuda_graph")
    return not is_missing(value) and bool(value)


def _no_knees(comparison: KneeComparison) -> KneeComparison:
    """Without an SLO nothing is below a knee: the latency speedups alone."""
    none = Knee(None, False, "no slo: in the spec")
    latency = tuple(
        type(s)(rate=s.rate, e2e=s.e2e, itl=s.itl, below_knees=False) for s in comparison.latency
    )
    return KneeComparison(knee=none, baseline=none, ratio=None, latency=latency)


def rate_text(rate: float | None) -> str:
    """`2`, `0.5`, `inf`, or `-` (no rate)."""
    if rate is None:
        return "-"
    return "inf" if math.isinf(rate) else f"{rate:g}"
