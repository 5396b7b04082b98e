"""`sweeper nightly SPEC`: the job cron runs (lock, run, report, compare, prune)."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.commands.compare import threshold_option

#: Shared with `cron install --bisect`, which puts the flag on the nightly's command line.
BISECT_HELP = (
    "On a regression between two runs whose runtime commits differ, bisect between them "
    "(sweeper bisect) and report the first bad commit."
)


def command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    keep: int = typer.Option(14, "--keep", min=1, help="Runs of this sweep to keep."),
    threshold: str = typer.Option("5%", "--threshold", help="Smallest change to flag."),
    bisect: bool = typer.Option(False, "--bisect", help=BISECT_HELP),
) -> None:
    """Run the sweep once under a lock, report, compare with the last finished run, prune."""
    from sweeper.schedule.nightly import nightly  # matplotlib: only when the job runs

    raise typer.Exit(nightly(spec, results, keep, threshold_option(threshold), bisect))
