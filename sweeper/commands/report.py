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
from sweeper.report.paper import paper_csv, paper_markdown, run_paper_table
from sweeper.report.paper_layout import StoredReferenceError, reference_of
from sweeper.results.history import default_url
from sweeper.results.manifest import Manifest
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
    table: str | None = typer.Option(
        None,
        "--table",
        help="'paper': print the paper-layout table (datasets x methods, speedup / tau, beside "
        "the spec's reference) instead of writing HTML.",
    ),
    table_format: str = typer.Option(
        "markdown", "--format", help="The table's format: markdown or csv."
    ),
    by: str = typer.Option(
        "method",
        "--by",
        help="Table columns: 'method' (AR, chain, tree: each its best config) "
        "or 'config' (every config).",
    ),
    startup: list[Path] = typer.Option(
        [],
        "--startup",
        help="Another run whose loads the Start-up section shows beside this run's (repeat it: "
        "several engines' starts in one report).",
    ),
) -> None:
    """Write one self-contained HTML report; the file's path is the last line printed. With
    `--table paper`, print the paper-layout table instead (markdown or CSV)."""
    target = _run_dir(run_dir, latest, results)
    try:
        if table is not None:
            _print_table(target, table, table_format, by)
            return
        from sweeper.report.history_note import TRENDS_PAGE, history_note
        from sweeper.report.render import write_report  # matplotlib: only when a report is made

        if out is not None and out.is_dir():
            raise _fail(f"-o {out} is a directory: give the report's file name")
        if out is None and not os.access(target, os.W_OK):
            typer.echo(f"error: {target} is read-only: give -o FILE for the report", err=True)
            raise typer.Exit(EXIT_IO)
        run = checked(read_run(target))
        if run.manifest is None:  # the records still report; what was run is unknown
            typer.echo(
                f"warning: {target / MANIFEST} is unreadable (empty, cut or edited): the report "
                "shows the records without what was run (spec, engine, provenance unknown)",
                err=True,
            )
        reference_of(run.manifest.spec if run.manifest else None)  # before any figure is drawn
        comparison = _comparison(run, against, baseline, threshold_option(threshold), force)
        others = [_manifest_of(other) for other in startup]
        root = target.parent.parent  # a run's results root: where its history and trends are
        note = history_note(default_url(root), run, root / TRENDS_PAGE)
        path = write_report(
            build_view(run),
            out or target / "report.html",
            comparison,
            None,
            startup=others,
            history=note,
        )
    except StoredReferenceError as exc:  # as `diagnose` says of a spec that no longer validates
        raise _fail(
            f"{target / MANIFEST}: the run's reference does not validate today ({exc}); the "
            "manifest was edited or written by another version: restore it"
        ) from None
    typer.echo(str(path))


def _manifest_of(run_dir: Path) -> Manifest:
    """`--startup RUN`'s manifest (its loads), or exit 2 saying why it has none."""
    if not is_run_dir(run_dir):
        raise _fail(f"--startup {run_dir}: no run directory there")
    manifest = read_run(run_dir).manifest
    if manifest is None:
        raise _fail(f"--startup {run_dir}: its {MANIFEST} is unreadable")
    return manifest


def _print_table(target: Path, table: str, table_format: str, by: str) -> None:
    """`--table paper`: the table on stdout (with CSV, its flags on stderr, one line each)."""
    if table != "paper":
        raise _fail(f"--table {table!r}: the only table is 'paper'")
    if table_format not in ("markdown", "csv"):
        raise _fail(f"--format {table_format!r}: give markdown or csv")
    if by not in ("method", "config"):
        raise _fail(f"--by {by!r}: give method or config")
    run = checked(read_run(target))
    points = run.points
    made = (
        None
        if points is None
        else run_paper_table(run, points, "method" if by == "method" else "config")
    )
    if made is None or not made.rows:
        raise _fail(f"{target}: no dataset points (the workload names no datasets, or none ran)")
    if table_format == "markdown":  # the flags are listed below the table
        typer.echo(paper_markdown(made), nl=False)
        return
    typer.echo(paper_csv(made), nl=False)
    for flag in made.flags:  # CSV has a column for them; people read them here
        typer.echo(f"flag: {flag}", err=True)
