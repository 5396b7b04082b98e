"""compare: identity matching across runs, noise-aware flags, new failures and breakage, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sweeper.analysis.compare import compare_loaded, parse_threshold
from sweeper.commands import compare, report
from sweeper.results.reader import read_run
from tests.sweeper.results_factory import RunShape, make_run

SLOWED = (16, 1, 0.0, True)
# The verbs under test, registered as in sweeper/cli.py (without the other verbs' imports).
app = typer.Typer()
app.command("compare")(compare.command)
app.command("report")(report.command)


def _pair(tmp_path: Path, **later: object) -> tuple[Path, Path]:
    a = make_run(tmp_path, RunShape(run_id="20261128T020000Z-aaaa", seed=1))
    b = make_run(tmp_path, RunShape(run_id="20261129T020000Z-bbbb", seed=2, **later))  # type: ignore[arg-type]
    return a, b


def test_one_planted_regression_flags_exactly_that_point(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, slow={SLOWED: 0.85})
    comparison = compare_loaded(read_run(a), read_run(b), 0.05)
    assert len(comparison.rows) == 18  # every point matched although point ids differ
    assert all(not r.flags[0].startswith(("new", "missing")) for r in comparison.rows if r.flags)
    assert [r.label for r in comparison.regressions] == ["b16 k1 bs8 cg T=0 c=1"]
    flags = comparison.regressions[0].flags
    assert flags[0].startswith("output_tok_s -1") and flags[0].endswith("regression")
    assert [r for r in comparison.rows if r.flags] == comparison.regressions


def test_identical_runs_modulo_noise_flag_nothing(tmp_path: Path) -> None:
    run_a, run_b = map(read_run, _pair(tmp_path))
    comparison = compare_loaded(run_a, run_b, 0.05)
    assert not comparison.regressed
    assert [r.flags for r in comparison.rows if r.flags] == []


def test_a_change_within_the_spread_of_repeats_is_not_flagged(tmp_path: Path) -> None:
    # 10% slower: flagged when repeats agree, not when they scatter more than that
    def slowed_point(noise: float) -> object:
        runs = [
            make_run(tmp_path / str(noise), RunShape(run_id=rid, seed=seed, noise=noise, slow=slow))
            for rid, seed, slow in (
                ("20261128T020000Z-aaaa", 1, {}),
                ("20261129T020000Z-bbbb", 2, {SLOWED: 0.9}),
            )
        ]
        comparison = compare_loaded(read_run(runs[0]), read_run(runs[1]), 0.05)
        return next(r for r in comparison.rows if r.label == "b16 k1 bs8 cg T=0 c=1")

    quiet, noisy = slowed_point(0.02), slowed_point(1.0)
    assert quiet.is_regression and quiet.noise["output_tok_s"] < 0.05  # type: ignore[attr-defined]
    assert not noisy.is_regression and noisy.noise["output_tok_s"] > 0.1  # type: ignore[attr-defined]


def test_new_failure_and_newly_broken_determinism_are_regressions(tmp_path: Path) -> None:
    a, b = _pair(
        tmp_path,
        fail={(8, 1, 0.0, False): "server exited"},
        diverge={(16, 4, 0.0, False): "garbled"},
    )
    comparison = compare_loaded(read_run(a), read_run(b), 0.05)
    flagged = {r.label: r.flags for r in comparison.regressions}
    assert flagged == {
        "b8 k1 bs8 T=0 c=1": ["new failure"],
        "b16 k4 bs8 T=0 c=1": ["determinism broken (garbled)"],
    }


def test_a_sampled_violation_and_a_lost_proof_are_regressions(tmp_path: Path) -> None:
    a, b = _pair(
        tmp_path,
        diverge={(16, 4, 0.7, False): "shifted", (8, 1, 0.7, False): "unproven"},
    )
    comparison = compare_loaded(read_run(a), read_run(b), 0.05)
    flagged = {r.label: r.flags for r in comparison.regressions}
    assert flagged == {
        "b16 k4 bs8 T=0.7 c=1": ["determinism broken (shifted)"],
        "b8 k1 bs8 T=0.7 c=1": ["no longer proven (unproven)"],
    }


def test_points_only_in_one_run_are_listed_not_regressions(tmp_path: Path) -> None:
    a = make_run(tmp_path, RunShape(run_id="20261128T020000Z-aaaa", budgets=(8,)))
    b = make_run(tmp_path, RunShape(run_id="20261129T020000Z-bbbb", budgets=(8, 16)))
    comparison = compare_loaded(read_run(a), read_run(b), 0.05)
    assert not comparison.regressed
    assert sum(r.flags == ["new point"] for r in comparison.rows) == 8
    # The report renders a comparison with points that have no counterpart.
    result = CliRunner().invoke(app, ["report", str(b), "--compare", str(a)])
    assert result.exit_code == 0, result.output
    assert "new point" in Path(result.output.strip().splitlines()[-1]).read_text()


def test_cli_exits_1_on_regression_and_prints_the_point(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, slow={SLOWED: 0.8})
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--threshold", "5%"])
    assert result.exit_code == 1, result.output
    assert "b16 k1 bs8 cg T=0 c=1" in result.output and "regression" in result.output
    result = CliRunner().invoke(app, ["compare", str(a), str(a)])
    assert result.exit_code == 0, result.output


def test_report_shows_the_comparison(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, slow={SLOWED: 0.8})
    result = CliRunner().invoke(app, ["report", str(b), "--baseline", "previous"])
    assert result.exit_code == 0, result.output
    html = Path(result.output.strip().splitlines()[-1]).read_text()
    assert "Compared with 20261128T020000Z-aaaa" in html
    assert "1 regressions" in html and "output_tok_s -" in html


@pytest.mark.parametrize(
    ("text", "value"), [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), ("0", 0.0)]
)
def test_threshold_parsing(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["five", "-5%", "%"])
def test_bad_threshold_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="threshold"):
        parse_threshold(text)


def test_an_impossible_speedup_in_either_run_is_marked_with_why(tmp_path: Path) -> None:
    # Run B's AR baseline at T=0 ran at a third of its speed: its T=0 speedups read above tau.
    a, b = _pair(tmp_path, slow={(0, 0, 0.0, False): 0.3})
    comparison = compare_loaded(read_run(a), read_run(b), 0.05)
    marked = [r for r in comparison.rows if r.untrusted]
    assert len(marked) == 8 and all(r.label.endswith(" T=0 c=1") for r in marked)
    why = marked[0].untrusted[0]
    assert why.startswith("impossible speedup in this run: speedup ") and " above tau " in why
    assert "8 with an impossible speedup (above tau)" in comparison.summary
    # Marks, not regressions: only the slowed AR itself regressed.
    assert [r.label for r in comparison.regressions] == ["AR T=0 c=1"]
    result = CliRunner().invoke(app, ["compare", str(b), str(a)])  # now the earlier run has them
    assert result.exit_code == 0, result.output
    assert result.output.count("impossible speedup in 20261129T020000Z-bbbb") == 8
