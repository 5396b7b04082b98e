"""`sweeper compare RUN_A RUN_B`: per-point deltas of B against A; exit 1 on a regression. A
point with an impossible speedup (above its tau) in either run is listed with why, never a
regression of its own."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sweeper.analysis.compare import Comparison, compare_loaded, parse_threshold, sweep_differences
from sweeper.commands.repair import checked
from sweeper.diagnosis.compare import with_diagnosis
from sweeper.exit_codes import EXIT_BAD_SPEC as EXIT_USAGE
from sweeper.exit_codes import EXIT_REGRESSION
from sweeper.proof.indistinguishable import describe, indistinguishable_in
from sweeper.report.formatting import pct
from sweeper.results.reader import MANIFEST, Run, is_run_dir, read_run

FORCE_HELP = "Compare runs of different sweeps (name, prompts or workload) anyway."


def refuse_other_sweeps(run_a: Run, run_b: Run, force: bool) -> None:
    """Exit 2 when the two runs are not one sweep (unless `force`); a warning with it."""
    manifests = [run_a.manifest, run_b.manifest]
    if manifests[0] is None or manifests[1] is None:
        bad = run_a.dir if manifests[0] is None else run_b.dir
        typer.echo(f"error: {bad}/{MANIFEST} is unreadable (sweeper ls shows it)", err=True)
        raise typer.Exit(EXIT_USAGE)
    differences = sweep_differences(manifests[0].spec, manifests[1].spec)
    if not differences:
        return
    what = "; ".join(differences)
    if force:
        typer.echo(f"warning: comparing runs of different sweeps ({what})", err=True)
        return
    typer.echo(
        f"error: {run_a.dir} and {run_b.dir} are runs of different sweeps ({what}); "
        "--force compares them anyway",
        err=True,
    )
    raise typer.Exit(EXIT_USAGE)


def threshold_option(text: str, above_zero: bool = False, below: float = 10.0) -> float:
    """Parse --threshold (`parse_threshold`'s bounds) or exit 2 with the reason."""
    try:
        return parse_threshold(text, above_zero, below)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None


def print_table(comparison: Comparison, console: Console, everything: bool) -> None:
    """The comparison as a rich table (only changed points unless `everything`)."""
    table = Table(title=f"against {comparison.baseline_name}: {comparison.summary}")
    for name in ("host", "point", "tok/s", "Δ tok/s", "Δ tau", "Δ TTFT", "noise ±", "flags"):
        table.add_column(name, justify="left" if name in ("host", "point", "flags") else "right")
    for row in comparison.rows:
        if not (everything or row.flags or row.within_noise or row.untrusted):
            continue
        style = "bold red" if row.is_regression else ("green" if row.flags else "")
        table.add_row(
            row.host,
            row.label,
            "—" if row.b["output_tok_s"] is None else f"{row.b['output_tok_s']:.1f}",
            pct(row.delta.get("output_tok_s")),
            pct(row.delta.get("tau")),
            pct(row.delta.get("ttft_p50")),
            pct(row.noise.get("output_tok_s")),
            ", ".join(
                [
                    *row.flags,
                    *row.within_noise,
                    *row.untrusted,
                    *([row.diagnosis] if row.diagnosis else []),
                ]
            ),
            style=style,
        )
    console.print(table)


def command(
    run_a: Path = typer.Argument(..., help="The earlier run directory (the baseline)."),
    run_b: Path = typer.Argument(..., help="The later run directory."),
    threshold: str = typer.Option("5%", "--threshold", help="Smallest change to flag."),
    everything: bool = typer.Option(False, "--all", help="Show unchanged points too."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> None:
    """Compare two runs point by point; exit 1 when B regressed against A."""
    limit = threshold_option(threshold)
    for path in (run_a, run_b):
        if not is_run_dir(path):
            what = f"has no {MANIFEST}" if path.is_dir() else "does not exist"
            typer.echo(f"error: {path} is not a run directory ({what})", err=True)
            raise typer.Exit(EXIT_USAGE)
    first, second = read_run(run_a), read_run(run_b)
    refuse_other_sweeps(first, second, force)
    first, second = checked(first), checked(second)
    try:
        comparison = with_diagnosis(compare_loaded(first, second, limit), second)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    # Piped or captured output gets a wide table rather than 80 columns of wrapped labels.
    console = Console(width=None if sys.stdout.isatty() else 160, markup=False)
    print_table(comparison, console, everything)
    for note in describe(indistinguishable_in(second)):
        console.print(note, markup=False)
    if comparison.regressed:
        raise typer.Exit(EXIT_REGRESSION)
