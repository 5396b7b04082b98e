"""`sweeper nightly SPEC`: the job cron runs (lock, run, report, compare, prune)."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.analysis.compare import parse_threshold
from sweeper.bisect.speed import THRESHOLD_BELOW
from sweeper.commands.compare import threshold_option
from sweeper.exit_codes import EXIT_BAD_SPEC

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

    limit = threshold_option(threshold)
    if bisect:  # a speed regression is bisected at this threshold: the bisect's bounds hold
        try:
            parse_threshold(threshold, above_zero=True, below=THRESHOLD_BELOW)
        except ValueError as exc:
            typer.echo(f"error: --bisect: {exc} (a speed bisect's bounds)", err=True)
            raise typer.Exit(EXIT_BAD_SPEC) from None
    raise typer.Exit(nightly(spec, results, keep, limit, bisect))
