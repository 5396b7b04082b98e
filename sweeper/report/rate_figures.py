"""Figures of the open-loop points: throughput and latency against the offered rate, a line per
config, one figure per host and request setting (temperature, arrival process).

Rates sit at evenly spaced positions labelled with their value (`inf` last), since a sweep's
rates are often a geometric series with infinity at the end. Client-bound points are drawn as
red crosses off the lines: they measured the client, not the server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from sweeper.report.charts import Chart, to_data_uri  # noqa: E402
from sweeper.report.knees import rate_text  # noqa: E402

#: (column, axis label, scale): what each panel plots against the rate.
PANELS = (
    ("request_s", "completed requests/s", 1.0),
    ("output_tok_s", "output tok/s", 1.0),
    ("e2e_p50", "E2E p50 (s), p99 dashed", 1.0),
    ("request_itl_p50", "request ITL p50 (ms)", 1000.0),
)


def _xy(points: Sequence[tuple[Any, Any]]) -> tuple[list[Any], list[Any]]:
    return [x for x, _ in points], [y for _, y in points]


def _bound(frame: pd.DataFrame) -> pd.Series:
    if "client_bound" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["client_bound"].fillna(False).astype(bool)


def rate_charts(points: pd.DataFrame) -> list[Chart]:
    """Throughput and latency vs offered rate per host and setting (none without open loops)."""
    if points.empty or "rate" not in points:
        return []
    data = points[points["rate"].notna() & (points["status"] == "ok")]
    charts: list[Chart] = []
    settings = ["host", "temperature", *(k for k in ("arrival", "burstiness") if k in data)]
    for key, group in data.groupby(settings, dropna=False, sort=True):
        rates = sorted(group["rate"].astype(float).unique())
        position = {rate: i for i, rate in enumerate(rates)}
        fig, axes = plt.subplots(
            1, len(PANELS), figsize=(4.2 * len(PANELS), 3.6), squeeze=False, layout="constrained"
        )
        for label, line in group.groupby("config", sort=False):
            line = line.sort_values("rate")
            xs = [position[float(r)] for r in line["rate"]]
            bound = _bound(line).to_numpy()
            for ax, (column, _title, scale) in zip(axes[0], PANELS, strict=True):
                if column not in line:
                    continue
                ys = line[column].astype(float) * scale
                good = [(x, y) for x, y, b in zip(xs, ys, bound, strict=True) if not b]
                drawn = ax.plot(*_xy(good), marker="o", label=str(label)) if good else []
                if column == "e2e_p50" and "e2e_p99" in line and drawn:
                    p99 = line["e2e_p99"].astype(float)
                    tail = [(x, y) for x, y, b in zip(xs, p99, bound, strict=True) if not b]
                    ax.plot(*_xy(tail), linestyle="--", color=drawn[0].get_color())
                crosses = [(x, y) for x, y, b in zip(xs, ys, bound, strict=True) if b]
                if crosses:
                    ax.plot(*_xy(crosses), "x", color="red", markersize=9, mew=2)
        # Below its knee an open loop completes what it is sent: the schedule's own rate (a few
        # dozen Poisson arrivals can average well off the nominal rate; every config gets the
        # same schedule).
        sent = group.groupby("rate")["achieved_rate"].mean() if "achieved_rate" in group else None
        finite = [(position[r], sent[r]) for r in rates if math.isfinite(r) and sent is not None]
        if finite:
            axes[0][0].plot(*_xy(finite), ":", color="grey", marker=".", label="sent")
        for ax, (_column, title, _scale) in zip(axes[0], PANELS, strict=True):
            ax.set_xticks(range(len(rates)), [rate_text(r) for r in rates])
            ax.set_xlabel("offered rate (req/s)")
            ax.set_ylabel(title)
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        host, temperature = key[0], key[1]
        arrival = f", {key[2]}" if len(key) > 2 and isinstance(key[2], str) else ""
        fig.suptitle(f"{host}: throughput and latency vs offered rate (T={temperature:g}{arrival})")
        caption = "Red crosses: client-bound points (the client's limit, not the server's)."
        charts.append(
            Chart(f"Rate sweep: {host} T={temperature:g}{arrival}", to_data_uri(fig), caption)
        )
    return charts
