"""Pareto figures: per-user tok/s against total output tok/s (a line per config through its loads,
the front drawn and its configs named), and speedup against load (the best feasible config at
each load starred: the answer's winners, the summary table's stars). Infeasible configs (not
proven right: a violation, unproven, a damaged verdict) are grey crosses: shown, so a fast wrong
config is visible, never on a front. A speedup that is no result (busy, its host or its
baseline's, or impossible: above the point's tau) is a hollow grey diamond off its config's
line, never starred, and named in the caption."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from sweeper.report.charts import Chart, to_data_uri  # noqa: E402
from sweeper.report.pareto import (  # noqa: E402
    USER_TOK_S,
    feasible_points,
    pareto_front,
)


def pareto_charts(points: pd.DataFrame) -> list[Chart]:
    """The two Pareto figures per temperature (none without speculative points)."""
    if points.empty or not (points["mode"] == "speculative").any():
        return []
    frame = feasible_points(points)
    charts = []
    for temperature, level in frame.groupby("temperature"):
        charts += _interactivity(level, float(temperature))
        charts += _speedup_vs_load(level, float(temperature))
    return charts


def _interactivity(frame: pd.DataFrame, temperature: float) -> list[Chart]:
    data = frame[frame["output_tok_s"].notna() & frame[USER_TOK_S].notna()]
    if data.empty:
        return []
    front = pareto_front(data, "output_tok_s", USER_TOK_S)
    fig, ax = plt.subplots(figsize=(9, 4.8), layout="constrained")
    for label, config in data.groupby("label", sort=False):
        xs, ys = config["output_tok_s"], config[USER_TOK_S]
        if not config["feasible"].all():
            ax.scatter(xs, ys, marker="x", color="#9e9e9e", zorder=2)
            continue
        style = "k--" if (config["mode"] == "ar").all() else "-"
        ax.plot(xs, ys, style, marker="o", alpha=0.45, linewidth=1, markersize=4, label=label)
    on = data[front].sort_values("output_tok_s")
    ax.plot(on["output_tok_s"], on[USER_TOK_S], "-", color="#d32f2f", linewidth=2.2, zorder=3)
    ax.scatter(on["output_tok_s"], on[USER_TOK_S], s=70, color="#d32f2f", zorder=4)
    for i, (_, row) in enumerate(on.iterrows()):
        ax.annotate(
            f"{row['label']} {row['load']}",
            (row["output_tok_s"], row[USER_TOK_S]),
            textcoords="offset points",
            # Above and below in turn: neighbours on a front sit close (24 configs, 2 loads).
            xytext=(5, 5 if i % 2 == 0 else -12),
            fontsize=8,
        )
    _legend(ax)
    ax.set_xlabel("total output tok/s (throughput)")
    ax.set_ylabel("per-user tok/s (1 / request ITL p50)")
    ax.set_title(f"Interactivity vs throughput, T={temperature:g}")
    ax.grid(alpha=0.3)
    names = ", ".join(f"{r['label']} at {r['load']}" for _, r in on.iterrows())
    caption = (
        f"Front (red): {names or 'none'}. A line per config through its loads; AR dashed; "
        "grey crosses: infeasible (not proven right: a violation, unproven or a damaged "
        "verdict), never on the front."
    )
    return [Chart(f"Pareto: per-user vs total tok/s, T={temperature:g}", to_data_uri(fig), caption)]


def _speedup_vs_load(frame: pd.DataFrame, temperature: float) -> list[Chart]:
    data = frame[frame["mode"] != "ar"]
    column = "speedup" if "speedup" in data and data["speedup"].notna().any() else "e2e_speedup"
    if column not in data or data[column].isna().all():
        return []
    loads = list(dict.fromkeys(data.sort_values(_load_order(data))["load"]))
    position = {load: i for i, load in enumerate(loads)}
    best = data["best"].astype(bool)  # the answer's winners (`sweeper best`'s rank)
    fig, ax = plt.subplots(figsize=(9, 4.4), layout="constrained")
    withheld = data["speedup_withheld"].astype(bool)
    legend_held = False
    for label, config in data.groupby("label", sort=False):
        xs = [position[v] for v in config["load"]]
        if not config["feasible"].all():
            ax.scatter(xs, config[column], marker="x", color="#9e9e9e", zorder=2)
            continue
        held = withheld[config.index].to_numpy()
        ys = config[column].where(~held)  # a gap in the line where the speedup is withheld
        ax.plot(xs, ys, marker="o", alpha=0.45, linewidth=1, markersize=4, label=label)
        if held.any():
            ax.scatter(
                [x for x, h in zip(xs, held, strict=True) if h],
                config.loc[held, column],
                marker="D",
                facecolors="none",
                edgecolors="#9e9e9e",
                zorder=2,
                label=None if legend_held else "speedup withheld",
            )
            legend_held = True
    starred = data[best]
    ax.scatter(
        [position[v] for v in starred["load"]], starred[column], marker="*", s=220, color="#d32f2f"
    )
    for _, row in starred.iterrows():
        ax.annotate(
            row["label"],
            (position[row["load"]], row[column]),
            textcoords="offset points",
            xytext=(6, 4),
            fontsize=8,
        )
    _legend(ax)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(loads)), loads)
    ax.set_xlabel("load")
    ax.set_ylabel(f"{column} vs AR")
    ax.set_title(f"Speedup vs load, T={temperature:g}")
    ax.grid(alpha=0.3)
    names = ", ".join(f"{r['load']}: {r['label']}" for _, r in starred.iterrows())
    caption = (
        f"Best feasible config per load (stars: the answer's, ranked as `sweeper best` ranks): "
        f"{names or 'none'}. Grey crosses: infeasible."
    )
    held = data[withheld & data["feasible"]]
    if not held.empty:
        caption += (
            " Hollow grey diamonds: speedups withheld (busy host, either side, or impossible: "
            "above the point's tau), never starred: "
            + ", ".join(f"{r['label']} at {r['load']}" for _, r in held.iterrows())
            + "."
        )
    return [Chart(f"Pareto: speedup vs load, T={temperature:g}", to_data_uri(fig), caption)]


def _legend(ax: Axes) -> None:
    if not ax.get_legend_handles_labels()[0]:
        return  # nothing labelled (every point failed): no empty legend box
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, ncol=1, frameon=False)


def _load_order(data: pd.DataFrame) -> list[str]:
    return [c for c in ("concurrency", "rate") if c in data]
