"""`sweeper repair RUN_DIR`: put back every record any copy holds, rewrite the views."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_IO, EXIT_LOCKED
from sweeper.results.lock import LockBusy, run_lock
from sweeper.results.reader import MANIFEST, Run, is_run_dir, sweep_lock
from sweeper.results.repair import RepairError, repair
from sweeper.search import SearchStateError, resumable_search


def command(run_dir: Path = typer.Argument(..., help="The run directory to repair.")) -> None:
    """Recover every record any copy holds, keep damaged lines aside, rewrite the views."""
    if not run_dir.is_dir():
        typer.echo(f"error: no run directory at {run_dir}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    manifest = run_dir / MANIFEST
    # Something that is no file in the manifest's place (a FIFO, a device link) is said by
    # `repair` naming it; only no manifest at all (or a directory) is no run.
    if not (is_run_dir(run_dir) or manifest.is_symlink() or manifest.exists()) or manifest.is_dir():
        typer.echo(f"error: {run_dir} is not a run directory (no {MANIFEST})", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    try:
        # The sweep's lock: never beside a run still writing these files (nor one starting).
        with run_lock(sweep_lock(run_dir.parent.parent, run_dir.parent.name)):
            broken = recovered(run_dir)
    except LockBusy as busy:
        holder = f"pid {busy.pid}" if busy.pid else "another process"
        message = f"{run_dir} is being written by {holder}; repair it when that ends"
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(EXIT_LOCKED) from None
    except (RepairError, SearchStateError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_IO) from None
    for line in broken:
        typer.echo(f"{run_dir}: {line}")
    if not broken:
        typer.echo(f"{run_dir}: nothing was broken")


def recovered(run_dir: Path) -> list[str]:
    """Everything a repair (and every resume, first) puts right: the records and views
    (`results.repair`), then the search's state; one line per thing done."""
    return [*repair(run_dir), *resumable_search(run_dir)]


def checked(run: Run) -> Run:
    """For commands that read a run: the run with its broken views rebuilt in memory (saying
    so on stderr; nothing is written); the same run when none was broken. A damaged settled
    line (a verdict column of a wrong type, a column it may not set, an unknown verdict) is
    never applied: its point is read with no verdict (never proven), and it is said."""
    from sweeper.results.recover import damage_said
    from sweeper.results.repair import RecoveredRun, repaired

    damage = run.settled_damage
    if damage:
        more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
        typer.echo(
            f"note: {run.dir}: {damage[0]}{more}: not applied, its point has no verdict "
            f"(`sweeper repair {run.dir}` keeps the line aside)",
            err=True,
        )
    run = repaired(run)
    if run.rebuilt:
        names = ", ".join(run.rebuilt)
        damaged = run.recovery.damaged if isinstance(run, RecoveredRun) else []
        typer.echo(
            f"note: {run.dir}: {names} rebuilt in memory from every copy of the records "
            f"(`sweeper repair {run.dir}` writes them)"
            + (f"; damaged: {damage_said(damaged)}" if damaged else ""),
            err=True,
        )
    return run
