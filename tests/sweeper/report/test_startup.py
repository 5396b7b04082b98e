"""The report's Start-up section: a table per host and engine of each load's phases, from this
run and the runs given beside it (`sweeper report --startup RUN`), every string from the
manifest escaped, and the stacked bar figure."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.loads import LoadRecord, StartPhase
from sweeper.results.store import RunStore
from tests.sweeper.results_factory import RunShape, make_run


def _with_loads(run_dir: Path, engine: str, phases: list[StartPhase]) -> None:
    store = RunStore.open(run_dir)
    store.manifest.spec = {**store.manifest.spec, "runtime": {"engine": engine}}
    store.manifest.loads.append(
        LoadRecord(
            host="local",
            label="b2-cg1",
            index=0,
            launch_id="x",
            started_at="2026-12-06T13:24:55+00:00",
            ready_s=121.5,
            phases=phases,
        )
    )
    store.save_manifest()


def test_startup_section_shows_each_runs_phases_escaped(tmp_path: Path) -> None:
    own = make_run(
        tmp_path / "a", RunShape(status="running", write_points=False, write_requests=False)
    )
    other = make_run(
        tmp_path / "b", RunShape(status="running", write_points=False, write_requests=False)
    )
    _with_loads(
        own,
        "vllm",
        [
            StartPhase(name="process_up", at_s=2.0, source="log", evidence="<b>banner</b>"),
            StartPhase(name="weights_loaded", at_s=18.0, source="log", evidence="weights"),
            StartPhase(name="graphs_captured", at_s=117.0, source="log", evidence="compiled"),
            StartPhase(name="ready", at_s=121.5, source="health", evidence="/health 200"),
        ],
    )
    _with_loads(
        other,
        "sglang",
        [
            StartPhase(name="process_up", at_s=6.0, source="log", evidence="first"),
            StartPhase(name="weights_loaded", at_s=None, source="log", evidence="no time"),
            StartPhase(name="ready", at_s=40.0, source="health", evidence="/health 200"),
        ],
    )
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(own), "-o", str(out), "--startup", str(other)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    section = html[html.index('<h2 id="startup">') : html.index('<h2 id="figures">')]
    assert "local &middot; vllm &middot;" in section and "local &middot; sglang &middot;" in section
    vllm_row, sglang_row = section.split("<tr><td>0</td>")[1:3]
    cells = lambda row: [c.split("<")[0] for c in row.split("<td>")[1:6]]  # noqa: E731
    assert cells(vllm_row) == ["2.00", "16.00", "99.00", "4.50", "121.50"]
    assert cells(sglang_row) == ["6.00", "unknown", "not reported", "34.00", "121.50"]
    assert "&lt;b&gt;banner&lt;/b&gt;" in section and "<b>banner" not in section
    assert 'id="figure-startup"' in section and "data:image/png;base64," in section
