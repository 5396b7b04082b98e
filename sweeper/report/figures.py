"""Matplotlib figures of a run, as PNG data URIs so the report is one self-contained file.

Every figure is drawn from aggregates (per-point numbers, precomputed box statistics, a sampled
set of inter-token latencies), never from raw rows, so a million-request run draws as fast as
a small one. A figure with no data is skipped rather than drawn empty.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from sweeper.proof.verdicts import COLOURS, MATRIX_STATES  # noqa: E402
from sweeper.report.assemble import RunView, speedup_withheld  # noqa: E402
from sweeper.report.charts import Chart, to_data_uri  # noqa: E402
from sweeper.report.pareto_figures import pareto_charts  # noqa: E402
from sweeper.report.rate_figures import rate_charts  # noqa: E402

MAX_BOXES = 40  # latency plots show at most this many configs (the slowest by median)


def _ok_ddtree(points: pd.DataFrame) -> pd.DataFrame:
    if points.empty or "budget" not in points or "topk" not in points:
        return points.iloc[0:0]
    keep = (points["mode"] == "speculative") & (points["status"] == "ok")
    return points[keep & points["concurrency"].eq(points["concurrency"].min())]


def withheld_kinds(points: pd.DataFrame) -> pd.Series:
    """Per point, why its speedup is no result in a figure: "impossible" (above its tau),
    "busy" (its host or its baseline's: `assemble.speedup_withheld`), else ""."""
    impossible = points.get("speedup_impossible", pd.Series(False, index=points.index))
    busy = speedup_withheld(points) != ""
    kinds = np.where(
        impossible.fillna(False).astype(bool), "impossible", np.where(busy, "busy", "")
    )
    return pd.Series(kinds, index=points.index, dtype=object)


def speedup_grid(cell: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One heatmap panel: budget x topk, the mean speedup over a cell's points (restarts), and
    what withholds it ("impossible", "busy", ""). A cell holding a withheld point has no value:
    it is drawn hatched, never coloured as a result."""
    frame = cell.assign(withheld=withheld_kinds(cell))
    grouped = frame.groupby(["budget", "topk"])
    values = grouped["speedup"].mean().unstack("topk")
    kinds = grouped["withheld"].agg(_worst_kind).unstack("topk").reindex_like(values)
    kinds = kinds.fillna("").astype(object)
    return values.mask(kinds != ""), kinds


def _worst_kind(kinds: pd.Series) -> str:
    return next((k for k in ("impossible", "busy") if (kinds == k).any()), "")


def speedup_heatmaps(points: pd.DataFrame) -> list[Chart]:
    """Speedup vs AR over budget x topk, one panel per temperature and cuda graph, per host;
    busy and impossible speedups hatched and named in the caption, out of the colour scale."""
    charts: list[Chart] = []
    data = _ok_ddtree(points)
    if "speedup" not in data or data["speedup"].isna().all():
        return charts
    data = data.assign(withheld=withheld_kinds(data))
    for host, hp in data.groupby("host"):
        trusted = hp.loc[hp["withheld"] == "", "speedup"].dropna()
        limits = (float(trusted.min()), float(trusted.max())) if len(trusted) else (0.0, 1.0)
        image = None
        temps = sorted(hp["temperature"].unique())
        graphs = sorted(hp["cuda_graph"].fillna(False).astype(bool).unique())
        fig, axes = plt.subplots(
            len(temps),
            len(graphs),
            figsize=(4.4 * len(graphs), 3.4 * len(temps)),
            squeeze=False,
            layout="constrained",
        )
        for i, temp in enumerate(temps):
            for j, graph in enumerate(graphs):
                cell = hp[(hp["temperature"] == temp) & (hp["cuda_graph"].fillna(False) == graph)]
                title = f"T={temp:g}, cuda graph {'on' if graph else 'off'}"
                grid, kinds = speedup_grid(cell) if len(cell) else (pd.DataFrame(), None)
                image = _heatmap(axes[i][j], grid, title, limits, kinds) or image
        if image is not None:  # one shared scale, so panels compare at a glance
            fig.colorbar(image, ax=axes, shrink=0.8, label="speedup vs AR")
        fig.suptitle(f"{host}: speedup vs AR (concurrency {int(hp['concurrency'].min())})")
        charts.append(Chart(f"Speedup heatmap: {host}", to_data_uri(fig), _withheld_caption(hp)))
    return charts


def _withheld_caption(points: pd.DataFrame) -> str:
    """Which cells are hatched and why ("" when none is)."""
    kinds = {"impossible": "above the point's tau", "busy": "its host or its baseline's"}
    parts = []
    for kind, why in kinds.items():
        held = points[points["withheld"] == kind]
        names = dict.fromkeys(f"{r['config']} T={r['temperature']:g}" for _, r in held.iterrows())
        if names:
            parts.append(f"{kind} ({why}): {', '.join(names)}")
    if not parts:
        return ""
    return (
        "Hatched cells hold a speedup that is no result, left out of the colour scale: "
        + "; ".join(parts)
        + "."
    )


def _heatmap(
    ax: plt.Axes,
    grid: pd.DataFrame,
    title: str,
    limits: tuple[float, float],
    kinds: pd.DataFrame | None = None,
) -> AxesImage | None:
    ax.set_title(title, fontsize=10)
    if grid.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center")
        return None
    image = ax.imshow(
        grid.to_numpy(dtype=float),
        cmap="viridis",
        aspect="auto",
        origin="lower",
        vmin=limits[0],
        vmax=limits[1],
    )
    ax.set_xticks(range(len(grid.columns)), [str(int(c)) for c in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(int(b)) for b in grid.index])
    ax.set_xlabel("topk")
    ax.set_ylabel("budget")
    values = grid.to_numpy(dtype=float)
    middle = (limits[0] + limits[1]) / 2
    for (r, c), value in np.ndenumerate(values):
        if not np.isnan(value):  # dark text on the bright end of viridis, light on the dark end
            colour = "black" if value >= middle else "white"
            ax.text(c, r, f"{value:.2f}", ha="center", va="center", color=colour, fontsize=9)
    for (r, c), kind in np.ndenumerate(kinds.to_numpy() if kinds is not None else np.empty((0, 0))):
        if kind:  # withheld: hatched grey, its kind in place of a number
            box = Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#9e9e9e")
            ax.add_patch(box)
            ax.text(c, r, kind, ha="center", va="center", color="#616161", fontsize=8)
    return image


def throughput_and_tau(points: pd.DataFrame) -> list[Chart]:
    """Output tok/s and tau against budget, a line per topk (and cuda graph), per host."""
    charts: list[Chart] = []
    data = _ok_ddtree(points)
    if "output_tok_s" not in data:
        return charts
    for host, hp in data.groupby("host"):
        temps = sorted(hp["temperature"].unique())
        fig, axes = plt.subplots(
            2, len(temps), figsize=(5 * len(temps), 6.5), squeeze=False, layout="constrained"
        )
        ar = points[(points["mode"] == "ar") & (points["host"] == host)]
        for j, temp in enumerate(temps):
            at = hp[hp["temperature"] == temp]
            for (topk, graph), line in at.groupby(["topk", at["cuda_graph"].fillna(False)]):
                line = line.groupby("budget").mean(numeric_only=True)
                style = "-" if graph else "--"
                name = f"topk {int(topk)}{' cg' if graph else ''}"
                for row, metric in enumerate(("output_tok_s", "tau")):
                    if metric in line:
                        axes[row][j].plot(line.index, line[metric], style, marker="o", label=name)
            ar_speed = ar.loc[ar["temperature"] == temp, "output_tok_s"].mean()
            if not np.isnan(ar_speed):
                axes[0][j].axhline(ar_speed, color="grey", linestyle=":", label="AR")
            axes[0][j].set_title(f"T={temp:g}", fontsize=10)
            axes[0][j].set_ylabel("output tok/s")
            axes[1][j].set_ylabel("tau (tokens / verify round)")
            axes[1][j].set_xlabel("budget")
            axes[0][j].legend(fontsize=8)
        fig.suptitle(f"{host}: throughput and acceptance vs budget")
        charts.append(Chart(f"Throughput and tau: {host}", to_data_uri(fig)))
    return charts


def _box_stats(values: pd.Series, groups: pd.Series, labels: dict[str, str]) -> list[dict]:
    frame = pd.DataFrame({"v": values.to_numpy(), "g": groups.to_numpy()}).dropna()
    if frame.empty:
        return []
    q = frame.groupby("g", observed=True)["v"].quantile([0.05, 0.25, 0.5, 0.75, 0.95]).unstack()
    q.index = [labels.get(str(g), str(g)) for g in q.index]
    q = q.sort_values(0.5, ascending=False).head(MAX_BOXES)
    return [
        {
            "label": str(g),
            "whislo": r[0.05],
            "q1": r[0.25],
            "med": r[0.5],
            "q3": r[0.75],
            "whishi": r[0.95],
            "fliers": [],
        }
        for g, r in q.iterrows()
    ]


def latency_distributions(view: RunView) -> list[Chart]:
    """TTFT and ITL per config as box plots (5/25/50/75/95th percentiles)."""
    req, sample = view.requests, view.itl_sample
    labels = view.points.set_index("point_id")["config_long"].to_dict()
    has_ttft = {"ttft", "point_id"} <= set(req)
    ttft = _box_stats(req["ttft"], req["point_id"], labels) if has_ttft else []
    itl = _box_stats(sample["itl"] * 1000, sample["point_id"], labels) if len(sample) else []
    panels = [(s, t) for s, t in ((ttft, "TTFT (s)"), (itl, "inter-token latency (ms)")) if s]
    if not panels:
        return []
    rows = sum(len(s) for s, _ in panels)
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(9, 0.26 * rows + 1.2 * len(panels)),
        squeeze=False,
        gridspec_kw={"height_ratios": [len(s) for s, _ in panels]},
        layout="constrained",
    )
    for ax, (stats, title) in zip(axes[:, 0], panels, strict=True):
        ax.bxp(stats, orientation="horizontal", showfliers=False)
        ax.set_xlabel(title)
        ax.tick_params(axis="y", labelsize=8)
    caption = f"Slowest {MAX_BOXES} configs by median shown." if len(ttft) >= MAX_BOXES else ""
    return [Chart("Latency distributions", to_data_uri(fig), caption)]


def determinism_matrix(matrix: pd.DataFrame) -> list[Chart]:
    """Config x prompt, coloured by the worst verdict over repeats."""
    if matrix.empty:
        return []
    lookup = {name: i for i, name in enumerate(MATRIX_STATES)}
    cells = [lookup.get(v, lookup["diverged"]) for v in matrix.to_numpy().ravel()]
    codes = np.array(cells, dtype=float).reshape(matrix.shape)
    cmap = ListedColormap([COLOURS[name] for name in MATRIX_STATES])
    rows, cols = matrix.shape
    fig, ax = plt.subplots(
        figsize=(min(16, 3 + 0.35 * cols), 1.2 + 0.28 * rows), layout="constrained"
    )
    ax.imshow(
        codes,
        cmap=cmap,
        vmin=-0.5,
        vmax=len(MATRIX_STATES) - 0.5,
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_yticks(range(rows), [str(i) for i in matrix.index], fontsize=8)
    if cols <= 40:
        ax.set_xticks(range(cols), [str(c) for c in matrix.columns], rotation=45, ha="right")
    ax.set_xlabel(f"prompt ({cols})")
    present = sorted(
        set(matrix.to_numpy().ravel()),
        key=lambda v: MATRIX_STATES.index(v) if v in MATRIX_STATES else 99,
    )
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=COLOURS.get(v, COLOURS["diverged"])) for v in present
    ]
    ax.legend(handles, present, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return [Chart("Determinism matrix", to_data_uri(fig), "Worst verdict over repeats.")]


def all_charts(view: RunView) -> list[Chart]:
    """Every figure the report shows, in order."""
    return [
        *speedup_heatmaps(view.points),
        *throughput_and_tau(view.points),
        *pareto_charts(view.points),
        *rate_charts(view.points),
        *latency_distributions(view),
        *determinism_matrix(view.verdict_matrix),
    ]
