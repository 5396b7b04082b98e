"""`sweeper report RUN --table paper` (markdown, CSV) and the report's "Paper table" section, on a
run whose requests name their datasets and whose manifest carries a reference: the papers'
layout, the published figures beside the measured ones, flags where tau is low, and usage
errors."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sweeper.catalog.reference_sets import REFERENCE_SETS
from sweeper.cli import app
from sweeper.report.assemble import build_view
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from sweeper.spec.reference import ReferenceSpec, ReferenceTable
from tests.sweeper.results_factory import RunShape, make_run

runner = CliRunner()


def _reference(rows: list[dict] | None = None) -> dict:
    """The built-in Qwen3-8B table, or a user's table of these rows."""
    if rows is None:
        table = ReferenceTable.model_validate(
            yaml.safe_load(REFERENCE_SETS["ddtree-paper-qwen3-8b"].read_text())
        )
        return ReferenceSpec(builtin="ddtree-paper-qwen3-8b", table=table).model_dump()
    table = ReferenceTable(name="ours", source="measured by us", rows=rows)  # type: ignore[arg-type]
    return ReferenceSpec(table=table).model_dump()


def _run(root: Path, reference: dict | None) -> Path:
    shape = RunShape(
        budgets=(16,),
        topks=(1, 4),
        cuda_graphs=(False,),
        temperatures=(0.0, 0.7),
        datasets=("gsm8k", "mt-bench"),
        spec={"reference": reference} if reference else {},
    )
    return make_run(root, shape)


def test_markdown_is_the_papers_layout_with_the_reference_beside(tmp_path: Path) -> None:
    run = _run(tmp_path, _reference())
    done = runner.invoke(app, ["report", str(run), "--table", "paper"])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "| dataset | AR | DFlash | DFlash (reference) | DFlash + DDTree | "
        "DFlash + DDTree (reference) |"
    )
    assert lines[2].startswith("| *Temperature = 0*")
    gsm8k = lines[3].split(" | ")
    assert gsm8k[0] == "| GSM8K" and gsm8k[1] == "1.00x / 1.00"
    assert gsm8k[2].endswith("(b16 k1 bs8)** (tau low)")  # the factory's taus are far lower
    assert gsm8k[3] == "4.78x / 6.57" and gsm8k[5].rstrip(" |") == "6.75x / 9.54"
    assert lines[5].startswith("| *Temperature = 0.7*")
    assert lines[6].split(" | ")[3] == "\u2014"  # the paper has no T=0.7 figures
    flags = [line.split(": tau")[0] for line in lines if line.startswith("- **flag**: ")]
    # The factory's taus: 24 tokens in 7 rounds (3.43) for the chain, 6 (4.00) for the tree;
    # mt-bench's chain is 4.28 x 0.8 = 3.42 or more, so not flagged.
    assert flags == [
        "- **flag**: gsm8k T=0 DFlash (b16 k1 bs8)",
        "- **flag**: gsm8k T=0 DFlash + DDTree (b16 k4 bs8)",
        "- **flag**: mt-bench T=0 DFlash + DDTree (b16 k4 bs8)",
    ]
    assert lines[4].split(" | ")[2] == "1.93x / 3.43 (b16 k1 bs8)"
    assert any("ddtree-paper-qwen3-8b (Qwen/Qwen3-8B" in line for line in lines)


def test_csv_has_every_number_and_the_flag(tmp_path: Path) -> None:
    run = _run(tmp_path, _reference())
    done = runner.invoke(app, ["report", str(run), "--table", "paper", "--format", "csv"])
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert len(rows) == 2 * 2 * 3  # temperatures x datasets x (AR, chain, tree)
    tree = next(r for r in rows if r["dataset"] == "gsm8k" and r["method"] == "tree")
    assert tree["temperature"] == "0" and tree["config"] == "b16 k4 bs8"
    assert (tree["reference_speedup"], tree["reference_tau"]) == ("6.75", "9.54")
    assert tree["tau_flagged"] == "1" and float(tree["tau"]) < 9.54 * 0.8
    assert done.stderr.count("flag: ") == 3


def test_a_reference_the_run_meets_flags_nothing(tmp_path: Path) -> None:
    ours = [
        {"temperature": 0, "dataset": "gsm8k", "method": "tree", "tau": 4.0},
        {"temperature": 0, "dataset": "gsm8k", "method": "chain", "tau": 3.0},
    ]
    run = _run(tmp_path, _reference(ours))
    done = runner.invoke(app, ["report", str(run), "--table", "paper", "--by", "config"])
    assert done.exit_code == 0, done.output
    assert "**flag**" not in done.stdout and "tau low" not in done.stdout
    assert done.stdout.splitlines()[0] == (
        "| dataset | AR | b16 k1 bs8 | b16 k1 bs8 (reference) | b16 k4 bs8 | "
        "b16 k4 bs8 (reference) |"
    )


def test_the_html_report_has_the_table_and_its_flags(tmp_path: Path) -> None:
    html = render_html(build_view(read_run(_run(tmp_path, _reference()))))
    section = html[html.index('<h2 id="paper-table">') : html.index("<h2>Per dataset</h2>")]
    assert section.count('class="bad">Acceptance below the reference') == 3
    assert section.count('class="tau-low"') == 3
    assert '<th class="l">DFlash + DDTree (reference)</th>' in section
    assert "<em>Temperature = 0.7</em>" in section
    plain = render_html(build_view(read_run(_run(tmp_path / "plain", None))))
    assert '<h2 id="paper-table">' in plain and 'class="tau-low"' not in plain
    assert "(reference)" not in plain


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--table", "other"], "the only table is 'paper'"),
        (["--table", "paper", "--format", "xml"], "give markdown or csv"),
        (["--table", "paper", "--by", "budget"], "give method or config"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = runner.invoke(app, ["report", str(_run(tmp_path, None)), *args])
    assert done.exit_code == 2 and message in done.stderr


def test_a_run_without_datasets_has_no_paper_table(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(budgets=(16,), cuda_graphs=(False,)))
    done = runner.invoke(app, ["report", str(run), "--table", "paper"])
    assert done.exit_code == 2 and "no dataset points" in done.stderr


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        pytest.param({"tolerance": "x"}, "reference.tolerance", id="tolerance-x"),
        pytest.param(
            {"table": {"rows": [{"tau": float("nan")}]}}, "reference.table.rows.0.tau", id="nan-tau"
        ),  # fmt: skip
        pytest.param({"table": {"rows": []}}, "reference.table.rows", id="no-rows"),
    ],
)
def test_a_stored_reference_that_no_longer_validates_is_one_line(
    tmp_path: Path, damage: dict, field: str
) -> None:
    """Issue 40 #7: `report` and `report --table paper` died with exit 70 on a run whose stored
    reference no longer validates; now each says so in one line naming the manifest and the
    field (exit 2), as `diagnose` does of a spec."""
    reference = _reference([{"temperature": 0, "dataset": "gsm8k", "method": "tree", "tau": 3}])
    for key, value in damage.items():
        if key == "table":
            rows = reference["table"]["rows"]
            value = {"rows": [{**rows[0], **row} for row in value["rows"]]}
            reference["table"] = {**reference["table"], **value}
        else:
            reference[key] = value
    run = _run(tmp_path, reference)
    manifest = run / "manifest.json"
    for args in (["report", str(run)], ["report", str(run), "--table", "paper"]):
        done = runner.invoke(app, args)
        lines = done.output.strip().splitlines()
        assert done.exit_code == 2 and len(lines) == 1, (args, done.output)
        assert lines[0].startswith(f"error: {manifest}: the run's "), lines
        assert f"does not validate today ({field}: " in lines[0], lines
        assert lines[0].endswith(
            "the manifest was edited or written by another version: restore it"
        )
    assert not (run / "report.html").exists()
