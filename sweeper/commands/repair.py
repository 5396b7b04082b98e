"""`sweeper repair RUN_DIR`: rewrite a run's parquet and CSV views from its append-only records."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_IO
from sweeper.results.reader import Run
from sweeper.results.repair import RepairError, repair


def command(run_dir: Path = typer.Argument(..., help="The run directory to repair.")) -> None:
    """Rebuild points.parquet, points.csv and requests.parquet from the .jsonl records."""
    if not run_dir.is_dir():
        typer.echo(f"error: no run directory at {run_dir}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    try:
        broken = repair(run_dir)
    except RepairError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_IO) from None
    what = ", ".join(broken) if broken else "nothing was broken"
    typer.echo(f"rebuilt the views of {run_dir} from its records ({what})")


def checked(run: Run) -> Run:
    """For commands that read a run: the run with its broken views rebuilt first (saying so on
    stderr); the same run when none was broken."""
    from sweeper.results.repair import repaired

    run = repaired(run)
    if run.rebuilt:
        names = ", ".join(run.rebuilt)
        typer.echo(f"note: {run.dir}: rebuilt {names} from the .jsonl records", err=True)
    return run
