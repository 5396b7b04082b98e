"""The report: assembly of full and partial runs, escaping of model output, self-containment."""

from __future__ import annotations

import base64
import io
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from sweeper.report.assemble import build_view
from sweeper.report.render import render_html, write_report
from sweeper.results.reader import read_run
from tests.sweeper.results_factory import RunShape, make_run

HOSTILE = "<script>alert('x')</script> then </pre> and &amp; and <b>bold</b>"


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shape = RunShape(
        diverge={(8, 4, 0.0, False): "diverged", (16, 1, 0.0, True): "garbled"},
        fail={(16, 4, 0.0, True): "server exited before ready: CUDA OOM"},
        texts={0: HOSTILE},
    )
    return make_run(tmp_path_factory.mktemp("results"), shape)


def test_model_output_with_markup_is_rendered_as_text(planted_run: Path) -> None:
    html = render_html(build_view(read_run(planted_run)))
    assert "<script>" not in html  # neither ours nor the model's
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "then &lt;/pre&gt; and &amp;amp; and &lt;b&gt;bold&lt;/b&gt;" in html
    assert "<b>bold</b>" not in html


def test_divergences_show_reference_and_output_from_first_difference(planted_run: Path) -> None:
    view = build_view(read_run(planted_run))
    # prompt 0 of two planted points, two repeats each
    assert view.divergences_total == 4
    verdicts = sorted(d.verdict for d in view.divergences)
    assert verdicts == ["diverged", "diverged", "garbled", "garbled"]
    first = view.divergences[0]
    assert first.reference_name == "AR baseline"
    assert first.output_rest == HOSTILE  # nothing shared with the baseline poem
    assert first.reference_rest.startswith("Roses bloom")
    assert first.token_index == 5


def test_failed_point_has_reason_and_log_tail(planted_run: Path) -> None:
    view = build_view(read_run(planted_run))
    assert [f.reason for f in view.failures] == ["server exited before ready: CUDA OOM"]
    assert "RuntimeError: boom" in view.failures[0].log_tail
    assert view.failures[0].label == "b16 k4 bs8 cg T=0 c=1"


def test_best_exact_config_per_temperature_is_marked(planted_run: Path) -> None:
    points = build_view(read_run(planted_run)).points
    best = points[points["best"]]
    assert sorted(best["temperature"]) == [0.0, 0.7]
    for _, row in best.iterrows():
        same = points[(points.temperature == row.temperature) & (points.status == "ok")]
        exact = same[same.determinism.isin(["exact", "near-tie", "n/a"])]
        assert row.output_tok_s == exact.output_tok_s.max()
        assert row.determinism in ("exact", "n/a")


def test_report_is_self_contained_with_decodable_figures(planted_run: Path, tmp_path: Path) -> None:
    out = write_report(build_view(read_run(planted_run)), tmp_path / "r.html")
    html = out.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    # heatmap, throughput/tau, the two Pareto figures, latency, determinism matrix
    assert len(uris) == 6 and html.count('alt="Pareto: ') == 2
    for uri in uris:
        image = Image.open(io.BytesIO(base64.b64decode(uri)))
        assert image.size[0] > 200 and image.size[1] > 100


def test_partial_run_without_points_or_requests_still_renders(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(status="running", write_points=False, write_requests=False))
    html = render_html(build_view(read_run(run)))
    assert "What is missing" in html
    assert "did not finish" in html and "No points.parquet" in html
    assert "No requests.parquet" in html


def test_run_with_half_its_points_says_how_many_are_missing(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(status="interrupted"))
    import pandas as pd

    points = pd.read_parquet(run / "points.parquet")
    points.head(5).drop(columns=["tau"]).to_parquet(run / "points.parquet")
    view = build_view(read_run(run))
    assert any("Only 5 of 18 planned points" in note for note in view.missing)
    assert any("tau" in note for note in view.missing if "contract columns" in note)
    assert "interrupted" in render_html(view)


def test_run_without_manifest_renders_with_csv_points(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    (run / "manifest.json").unlink()
    (run / "points.parquet").unlink()
    view = build_view(read_run(run))
    assert len(view.points) == 18
    assert any("manifest.json" in note for note in view.missing)
    assert "Speedup heatmap" in render_html(view)


def test_missing_run_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no run directory"):
        build_view(read_run(tmp_path / "nope"))
    shutil.rmtree(tmp_path)


def test_killed_run_with_only_the_append_only_points_log_renders(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(status="running"))
    import pandas as pd

    points = pd.read_parquet(run / "points.parquet").head(3)
    lines = [points.iloc[i].to_json() for i in range(3)] + ['{"point_id": "torn']
    (run / "points.jsonl").write_text("\n".join(lines))
    for name in ("points.parquet", "points.csv"):
        (run / name).unlink()
    view = build_view(read_run(run))
    assert len(view.points) == 3
    assert any("Only 3 of 18 planned points" in note for note in view.missing)


def test_report_cli_options(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from sweeper.commands import report

    app = typer.Typer()
    app.command()(report.command)
    old = make_run(tmp_path, RunShape(run_id="20261128T020000Z-aaaa"))
    new = make_run(
        tmp_path, RunShape(run_id="20261129T020000Z-bbbb", slow={(8, 1, 0.0, True): 0.7})
    )
    invoke = CliRunner().invoke
    latest = invoke(app, ["--latest", "--results", str(tmp_path), "-o", str(tmp_path / "x.html")])
    assert latest.exit_code == 0 and latest.output.strip() == str(tmp_path / "x.html")
    assert "20261129T020000Z-bbbb" in (tmp_path / "x.html").read_text()
    compared = invoke(app, [str(new), "--compare", str(old)])
    assert compared.exit_code == 0, compared.output
    assert "Regression:" in (new / "report.html").read_text()
    for bad in (
        [str(new), "--latest"],
        [],
        [str(new), "--baseline", "yesterday"],
        [str(new), "--compare", str(old), "--baseline", "previous"],
        [str(tmp_path / "nope")],
        [str(new), "--threshold", "lots"],
    ):
        result = invoke(app, bad)
        assert result.exit_code == 2 and "error:" in result.output, (bad, result.output)
    first = invoke(app, [str(old), "--baseline", "previous"])
    assert first.exit_code == 0 and "no earlier finished run" in first.output


def test_the_diagnosis_section_sits_above_the_outputs(planted_run: Path) -> None:
    html = render_html(build_view(read_run(planted_run)))
    assert html.index("<h2>Diagnosis</h2>") < html.index(
        '<h2 id="outputs">Outputs that are not exact'
    )
    # Two configs broke on one prompt each: too few to single out a factor, and it says so.
    assert "4 of " in html and " judged requests are violations (diverged 2, garbled 2)" in html


def test_a_separable_run_shows_its_rule_and_the_plot(tmp_path: Path) -> None:
    broken = {(b, k, 0.0, True): "garbled" for b in (8, 16) for k in (1, 4)}
    run = make_run(tmp_path, RunShape(diverge=broken, n_prompts=1, repeats=4, temperatures=(0.0,)))
    html = render_html(build_view(read_run(run)))
    section = html[
        html.index("<h2>Diagnosis</h2>") : html.index('<h2 id="outputs">Outputs that are not exact')
    ]
    assert "violations only where cuda_graph = on" in section
    assert 'alt="Violations against the implicated factors" src="data:image/png;base64,' in section
    assert "16 of 36 judged requests are violations (garbled 16)" in section


def test_a_drifting_ar_baseline_gets_its_table_and_its_speedups_a_drift_flag(
    tmp_path: Path,
) -> None:
    import dataclasses

    import pandas as pd

    view = build_view(read_run(make_run(tmp_path)))
    assert "AR baseline drift" not in render_html(view)  # one measurement per baseline
    points = view.points
    ar = points[(points["mode"] == "ar") & (points["concurrency"] == 1)].head(1).copy()
    ar["restart"], ar["point_id"] = 1, ar["point_id"] + "-rs1"
    ar["started_at"] = "2099-01-01T00:00:00Z"  # measured last
    ar["output_tok_s"] = ar["output_tok_s"] * 0.8
    html = render_html(dataclasses.replace(view, points=pd.concat([points, ar])))
    assert "AR baseline drift" in html and "20.0%" in html
    assert "drifted beyond 10%" in html and ">drift</span>" in html
