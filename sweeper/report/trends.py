"""The history's trends page (`sweeper history show -o FILE.html`): per config, its tok/s (with
each night's interval), speedup and tau over runs, a band of its verdicts, and its change points
(`sweeper.analysis.changepoints`); one self-contained file, figures as data URIs, no scripts.

The x axis names each run and its runtime commit. Only the nights the detector counts are joined
into the line; a busy night (hollow orange triangle) or one not proven right (hollow grey
cross) is drawn apart at its value, so a reader sees it without it bending the trend.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from sweeper.analysis.changepoints import METRICS, ChangePoint, counted, series  # noqa: E402
from sweeper.proof.verdicts import COLOURS, standing  # noqa: E402
from sweeper.report.charts import Chart, to_data_uri  # noqa: E402
from sweeper.report.history_note import anchor  # noqa: E402
from sweeper.report.render import _env  # noqa: E402

#: At most this many runs are named on a figure's x axis (evenly spread, first and last kept).
MAX_TICKS = 14
NAMES = {"output_tok_s": "output tok/s", "speedup": "speedup", "tau": "tau"}


def trend_charts(history: pd.DataFrame, changes: list[ChangePoint]) -> list[Chart]:
    """One figure per config of the history, oldest run first."""
    charts = []
    for label, rows in series(history):
        mine = [c for c in changes if c.config == label]
        said = "; ".join(c.describe().partition(": ")[2] for c in mine) or "no change point"
        charts.append(Chart(label, _figure(rows, mine), said))
    return charts


def _figure(rows: pd.DataFrame, changes: list[ChangePoint]) -> str:
    shown = [m for m in METRICS if pd.to_numeric(rows[m], errors="coerce").notna().any()]
    heights = [3] * len(shown) + [0.6]
    fig, axes = plt.subplots(
        len(heights),
        1,
        sharex=True,
        figsize=(12, 1.2 + 1.6 * len(shown)),
        gridspec_kw={"height_ratios": heights},
        layout="constrained",
    )
    axes = np.atleast_1d(axes)
    x = np.arange(len(rows))
    keep = counted(rows).to_numpy()
    busy = rows["host_busy"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    place = {run: i for i, run in enumerate(rows["run_id"])}
    for ax, metric in zip(axes, shown, strict=False):
        values = pd.to_numeric(rows[metric], errors="coerce").to_numpy(dtype=float)
        _intervals(ax, rows, metric, x, values, keep)
        ax.plot(x[keep], values[keep], "o-", color="#1565c0", ms=3, lw=1.2, label="counted")
        ax.plot(x[busy], values[busy], "^", mfc="none", color="#ef6c00", label="busy host")
        apart = ~keep & ~busy
        ax.plot(x[apart], values[apart], "x", color="#757575", label="not proven")
        for change in (c for c in changes if c.metric == metric):
            _mark(ax, change, place)
        ax.set_ylabel(NAMES[metric])
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8, ncol=3)
    band = axes[-1]
    for i, verdict in enumerate(rows["determinism"]):
        colour = COLOURS.get(str(verdict), "#eeeeee") if standing(verdict) != "damaged" else "#000"
        band.axvspan(i - 0.5, i + 0.5, color=colour, lw=0)
    for change in (c for c in changes if c.kind == "verdict"):
        band.axvline(place.get(change.after_run, 0) - 0.5, color="#b71c1c", lw=2)
    band.set_yticks([])
    band.set_ylabel("verdict", rotation=0, ha="right", va="center")
    ticks = np.unique(np.linspace(0, len(rows) - 1, min(MAX_TICKS, len(rows))).round().astype(int))
    band.set_xticks(ticks)
    band.set_xticklabels([_tick(rows.iloc[i]) for i in ticks], rotation=45, ha="right", fontsize=7)
    band.set_xlim(-0.5, len(rows) - 0.5)
    return to_data_uri(fig)


def _intervals(
    ax: Axes, rows: pd.DataFrame, metric: str, x: np.ndarray, values: np.ndarray, keep: np.ndarray
) -> None:
    """Each counted night's interval as a bar (metrics the history keeps intervals for)."""
    if f"{metric}_low" not in rows:
        return
    low = pd.to_numeric(rows[f"{metric}_low"], errors="coerce").to_numpy(dtype=float)
    high = pd.to_numeric(rows[f"{metric}_high"], errors="coerce").to_numpy(dtype=float)
    has = keep & np.isfinite(low) & np.isfinite(high)
    if has.any():
        spread = [values[has] - low[has], high[has] - values[has]]
        ax.errorbar(x[has], values[has], yerr=spread, fmt="none", ecolor="#90caf9", lw=1)


def _mark(ax: Axes, change: ChangePoint, place: dict[str, int]) -> None:
    colour = "#c62828" if change.regression else "#2e7d32"
    end = place.get(change.after_run, 0)
    if change.kind == "drift":
        ax.axvspan(place.get(change.before_run, 0), end, color=colour, alpha=0.12, lw=0)
        ax.annotate(f"drift {change.change:+.1%}", (end, 0.02), xycoords=("data", "axes fraction"),
                    ha="right", fontsize=8, color=colour)  # fmt: skip
        return
    ax.axvline(end - 0.5, color=colour, ls="--", lw=1.5)
    ax.annotate(f"step {change.change:+.1%}", (end - 0.5, 0.95), xycoords=("data", "axes fraction"),
                ha="left", va="top", fontsize=8, color=colour)  # fmt: skip


def _tick(row: pd.Series) -> str:
    commit = row.get("runtime_commit")
    return f"{row['run_id']}\n{commit[:8] if isinstance(commit, str) else '-'}"


def trends_page(history: pd.DataFrame, changes: list[ChangePoint], source: str) -> str:
    """The page as a string: the change points' table, then a figure per config."""
    return (
        _env()
        .get_template("trends.html.j2")
        .render(
            source=source,
            runs=history["run_id"].nunique(),
            charts=trend_charts(history, changes),
            changes=changes,
            anchor=anchor,
        )
    )
