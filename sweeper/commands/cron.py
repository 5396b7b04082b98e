"""`sweeper cron install|list|remove`: the crontab entries of nightly sweeps."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.commands.nightly import BISECT_HELP
from sweeper.exit_codes import EXIT_BAD_SPEC
from sweeper.schedule import cron

app = typer.Typer(help="Schedule nightly sweeps in the crontab.", no_args_is_help=True)
USER_HELP = "Whose crontab (needs root) [the current user's]."


@app.command("install")
def install(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    schedule: str = typer.Option("0 2 * * *", "--schedule", help="Cron schedule."),
    keep: int = typer.Option(14, "--keep", min=1, help="Runs of this sweep to keep."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    user: str | None = typer.Option(None, "--user", help=USER_HELP),
    bisect: bool = typer.Option(False, "--bisect", help=BISECT_HELP),
) -> None:
    """Add or replace the nightly entry of SPEC."""
    try:
        entry = cron.install(spec, schedule, keep, results, user, bisect)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None
    typer.echo(f"installed: {entry.schedule} {entry.command}")


@app.command("list")
def list_(user: str | None = typer.Option(None, "--user", help=USER_HELP)) -> None:
    """Show the sweeper's crontab entries."""
    found = cron.entries(user)
    for entry in found:
        state = "" if entry.enabled else " (disabled)"
        typer.echo(f"{entry.schedule}  {entry.spec}{state}")
    if not found:
        typer.echo("no nightly sweeps installed")


@app.command("remove")
def remove(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    user: str | None = typer.Option(None, "--user", help=USER_HELP),
) -> None:
    """Remove the nightly entry of SPEC (exit 2 when there was none)."""
    try:
        removed = cron.remove(spec, user)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None
    if removed == 0:
        typer.echo(f"error: no nightly entry for {spec.resolve()}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    typer.echo(f"removed: {spec.resolve()}")
