"""The report never stars, colours or plots a busy or impossible speedup as a result: an AR
baseline that ran at a third of its speed makes every speedup against it read above its tau; those
points are marked impossible with the cause, left out of the best star, hatched in the heatmap and
never starred in the speedup-vs-load figure; a busy baseline's speedup likewise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis.impossible import UNSEEN_CAUSE
from sweeper.report.assemble import RunView, build_view
from sweeper.report.figures import speedup_grid, speedup_heatmaps
from sweeper.report.paper import paper_markdown, run_paper_table
from sweeper.report.pareto import feasible_points
from sweeper.report.pareto_figures import pareto_charts
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from tests.sweeper.results_factory import RunShape, make_run

#: The AR baseline at T=0 measured at a busier moment: a third of its speed.
SLOWED = RunShape(slow={(0, 0, 0.0, False): 0.3})


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> RunView:
    return build_view(read_run(make_run(tmp_path_factory.mktemp("results"), SLOWED)))


def _spec(points: pd.DataFrame, temperature: float) -> pd.DataFrame:
    ok = (points["mode"] != "ar") & (points["status"] == "ok")
    return points[ok & (points["temperature"] == temperature)]


def test_the_speedups_above_tau_are_marked_with_the_numbers_and_cause(view: RunView) -> None:
    cold, warm = _spec(view.points, 0.0), _spec(view.points, 0.7)
    assert (cold["speedup"] > cold["tau"]).all() and cold["speedup_impossible"].all()
    assert not warm["speedup_impossible"].any()
    reason = cold["speedup_impossible_reason"].iloc[0]
    assert reason.startswith("speedup ") and " above tau " in reason and UNSEEN_CAUSE in reason
    html = render_html(view)
    assert f"{len(cold)} points with an impossible speedup</strong>" in html
    assert html.count(">impossible</span>") == len(cold)
    assert html.count('<td class="withheld" title="speedup ') == 2 * len(cold)
    # the page's own tables still read: the drift table sees no grid flag in the marks
    assert "AR baseline drift" not in html


def test_no_star_on_an_impossible_speedup_nor_its_slowed_baseline(view: RunView) -> None:
    points = view.points
    starred = points[points["best"]]
    assert set(starred["temperature"]) == {0.7}  # T=0: every number there rests on the slow AR
    assert not starred["speedup_impossible"].any()


def test_the_heatmap_hatches_impossible_cells_out_of_the_scale(view: RunView) -> None:
    cold = _spec(view.points, 0.0)
    values, kinds = speedup_grid(cold[~cold["cuda_graph"]])
    assert values.isna().all().all() and (kinds == "impossible").all().all()
    values, kinds = speedup_grid(_spec(view.points, 0.7))
    assert values.notna().all().all() and (kinds == "").all().all()
    (chart,) = speedup_heatmaps(view.points)
    assert chart.caption.startswith("Hatched cells hold a speedup that is no result")
    assert "impossible (above the point's tau): b8 k1 bs8 T=0, b8 k1 bs8 cg T=0" in chart.caption
    assert "T=0.7" not in chart.caption and "busy" not in chart.caption


def test_the_speedup_vs_load_figure_stars_none_of_them(view: RunView) -> None:
    frame = feasible_points(view.points)
    spec = frame[frame["mode"] != "ar"]
    assert set(spec.loc[spec["best"], "temperature"]) == {0.7}
    assert spec.loc[spec["temperature"] == 0.0, "speedup_withheld"].all()
    captions = {c.title: c.caption for c in pareto_charts(view.points)}
    cold = captions["Pareto: speedup vs load, T=0"]
    assert cold.startswith("Best feasible config per load (stars: the answer's")
    assert "ranks): none." in cold
    # The stars are the answer's winners: the same points the summary table stars.
    warm = captions["Pareto: speedup vs load, T=0.7"]
    winners = spec[spec["best"] & (spec["temperature"] == 0.7)]
    assert not winners.empty
    assert all(f"{r['load']}: {r['label']}" in warm for _, r in winners.iterrows())
    assert "Hollow grey diamonds: speedups withheld" in cold and "b16 k4 bs8 cg at c=1" in cold
    assert "Hollow" not in captions["Pareto: speedup vs load, T=0.7"]


def test_a_busy_baseline_s_speedup_is_never_the_star_nor_coloured(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(temperatures=(0.7,)))
    first = build_view(read_run(run)).points
    winner = first[first["best"]].iloc[0]
    assert winner["mode"] != "ar"
    points = pd.read_parquet(run / "points.parquet")
    points["baseline_busy"] = points["point_id"] == winner["point_id"]
    points.to_parquet(run / "points.parquet", index=False)
    view = build_view(read_run(run))
    starred = view.points[view.points["best"]]
    assert len(starred) == 1 and starred["point_id"].iloc[0] != winner["point_id"]
    (chart,) = speedup_heatmaps(view.points)
    assert f"busy (its host or its baseline's): {winner['config']} T=0.7." in chart.caption
    budget, topk, graph = int(winner["budget"]), int(winner["topk"]), bool(winner["cuda_graph"])
    cell = _spec(view.points, 0.7)
    values, kinds = speedup_grid(cell[cell["cuda_graph"] == graph])
    assert pd.isna(values.loc[budget, topk]) and kinds.loc[budget, topk] == "busy"
    frame = feasible_points(view.points)
    spec = frame[frame["mode"] != "ar"]
    assert winner["point_id"] not in set(view.points.loc[view.points["best"], "point_id"])
    assert not spec.loc[spec["speedup_withheld"], "best"].any()
    assert render_html(view).count(">busy</span>") == 1  # marked in the summary


def test_the_paper_table_marks_them_per_dataset(tmp_path: Path) -> None:
    shape = dataclasses.replace(SLOWED, datasets=("gsm8k", "mt-bench"), cuda_graphs=(False,))
    run = read_run(make_run(tmp_path, shape))
    assert run.points is not None
    table = run_paper_table(run, run.points)
    assert table is not None
    cold = [c for r in table.rows if r.temperature == 0.0 for m, c in r.cells.items() if m != "ar"]
    warm = [c for r in table.rows if r.temperature > 0 for m, c in r.cells.items() if m != "ar"]
    assert cold and all(c.withheld.startswith("an impossible speedup (above tau)") for c in cold)
    assert warm and not any(c.withheld for c in warm)
    text = paper_markdown(table)
    assert text.count("[impossible] |") == len(cold) and "- [impossible]: a speedup above" in text
    html = render_html(build_view(run))
    assert html.count('<span class="withheld" title="an impossible speedup') == len(cold)
    start = html.index("<h2>Per dataset</h2>")
    per_dataset = html[start : html.index("<h2", start + 4)]
    assert per_dataset.count("x [impossible]</td>") == 4 * 2  # 4 configs x 2 datasets at T=0
    assert "[busy]</td>" not in per_dataset
