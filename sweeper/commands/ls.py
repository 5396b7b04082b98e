"""`sweeper ls`: the runs under a results root: sweep, run id, status, points, start time; and
this machine's host lease (who holds it, or that it is free: `sweeper doctor SPEC` reads the
leases of a spec's remote hosts)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_IO
from sweeper.hosts import HostError
from sweeper.hosts.lease import LeaseDamaged
from sweeper.hosts.local import LocalHost, local_state_dir
from sweeper.results.reader import MANIFEST, POINTS_LOG, all_runs, run_state
from sweeper.workers.leases import lease_state


def command(
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
) -> None:
    """List runs, oldest first."""
    if results.exists() and not results.is_dir():
        typer.echo(f"error: {results} is not a directory", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    found = all_runs(results)
    # Oldest first: run ids start with their UTC start time.
    runs = sorted(
        ((r.manifest, r.dir) for r in found if r.manifest is not None), key=lambda m: m[0].run_id
    )
    broken = sorted(r.dir for r in found if r.manifest is None)
    if not runs and not broken:
        typer.echo(f"no runs under {results}")
        _say_local_lease()
        return
    table = Table()
    for name in ("sweep", "run id", "status", "ok", "failed", "total", "started (UTC)"):
        table.add_column(name)
    for m, path in runs:
        table.add_row(
            m.sweep,
            m.run_id,
            run_state(path, m.status),
            str(m.points_ok),
            str(m.points_failed),
            str(m.points_total),
            (m.started_at or m.created_at)[:19].replace("T", " "),
        )
    for path in broken:  # its records may be intact: say so rather than hide the run
        table.add_row(path.parent.name, path.name, "bad manifest", "?", "?", "?", "?")
    Console(width=160, markup=False).print(table)
    for path in broken:  # its records may be intact: say so rather than hide the run
        typer.echo(
            f"warning: {path}/{MANIFEST} is unreadable; its records ({POINTS_LOG}) are untouched",
            err=True,
        )
    _say_local_lease()


def _say_local_lease() -> None:
    """This machine's lease as one line (local hosts of every spec share it); a lease that is
    no lease is an error line and exit 5, as it stops `sweeper run`."""
    state_dir = local_state_dir()
    try:
        _, said = lease_state(LocalHost(), state_dir)
    except LeaseDamaged as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_IO) from None
    except (HostError, OSError) as exc:
        said = f"unreadable ({exc})"
    typer.echo(f"host lease of this machine ({state_dir}): {said}")
