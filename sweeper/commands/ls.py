"""`sweeper ls`: the runs under a results root: sweep, run id, status, points, start time."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sweeper.results.reader import list_runs


def command(
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
) -> None:
    """List runs, oldest first."""
    runs = list_runs(results)
    if not runs:
        typer.echo(f"no runs under {results}")
        return
    table = Table()
    for name in ("sweep", "run id", "status", "ok", "failed", "total", "started (UTC)"):
        table.add_column(name)
    for m in runs:
        table.add_row(
            m.sweep,
            m.run_id,
            m.status,
            str(m.points_ok),
            str(m.points_failed),
            str(m.points_total),
            (m.started_at or m.created_at)[:19].replace("T", " "),
        )
    Console(width=160).print(table)
