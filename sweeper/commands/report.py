"""`sweeper report RUN_DIR [-o FILE]` (or `--latest`): write the run's self-contained report."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from sweeper.analysis.compare import Comparison, compare_loaded
from sweeper.commands.compare import EXIT_USAGE, FORCE_HELP, refuse_other_sweeps, threshold_option
from sweeper.commands.repair import checked
from sweeper.diagnosis.compare import with_diagnosis
from sweeper.exit_codes import EXIT_IO
from sweeper.report.assemble import build_view
from sweeper.results.reader import (
    MANIFEST,
    Run,
    is_run_dir,
    latest_run,
    previous_finished,
    read_run,
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _run_dir(run_dir: Path | None, latest: bool, results: Path) -> Path:
    if (run_dir is None) == (not latest):
        raise _fail("give a RUN_DIR or --latest (not both)")
    if latest:
        found = latest_run(results)
        if found is None:
            raise _fail(f"no runs under {results}")
        return found
    assert run_dir is not None
    if not run_dir.is_dir():
        raise _fail(f"no run directory at {run_dir}")
    if not is_run_dir(run_dir):
        raise _fail(f"{run_dir} is not a run directory (no {MANIFEST})")
    return run_dir


def _comparison(
    run: Run, against: Path | None, baseline: str | None, threshold: float, force: bool
) -> Comparison | None:
    if against is not None and baseline is not None:
        raise _fail("give --compare RUN or --baseline previous, not both")
    if baseline is not None:
        if baseline != "previous":
            raise _fail("--baseline accepts only 'previous'")
        against = previous_finished(run.dir)
        if against is None:
            typer.echo("note: no earlier finished run of this sweep; no comparison", err=True)
            return None
    if against is None:
        return None
    if not is_run_dir(against):
        raise _fail(f"no run directory at {against}")
    earlier = read_run(against)
    refuse_other_sweeps(earlier, run, force)
    return with_diagnosis(compare_loaded(checked(earlier), run, threshold), run)


def command(
    run_dir: Path | None = typer.Argument(None, help="The run directory to report on."),
    out: Path | None = typer.Option(None, "-o", "--out", help="Output file [RUN_DIR/report.html]."),
    latest: bool = typer.Option(False, "--latest", help="Report the newest run under --results."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    against: Path | None = typer.Option(None, "--compare", help="Compare with this earlier run."),
    baseline: str | None = typer.Option(
        None, "--baseline", help="'previous': compare with the last finished run of the sweep."
    ),
    threshold: str = typer.Option("5%", "--threshold", help="Smallest change to flag."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> None:
    """Write one self-contained HTML report; the file's path is the last line printed."""
    from sweeper.report.render import write_report  # matplotlib: only when a report is made

    target = _run_dir(run_dir, latest, results)
    if out is not None and out.is_dir():
        raise _fail(f"-o {out} is a directory: give the report's file name")
    if out is None and not os.access(target, os.W_OK):
        typer.echo(f"error: {target} is read-only: give -o FILE for the report", err=True)
        raise typer.Exit(EXIT_IO)
    run = checked(read_run(target))
    comparison = _comparison(run, against, baseline, threshold_option(threshold), force)
    path = write_report(build_view(run), out or target / "report.html", comparison)
    typer.echo(str(path))
