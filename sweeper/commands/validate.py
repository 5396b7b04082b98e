"""`sweeper validate SPEC`: load a spec and its plan; print a one-line summary or every error."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.plan import Plan, build_plan
from sweeper.spec import SpecError, load_spec

#: Exit code for a bad spec or bad usage, shared by every command.
EXIT_BAD_SPEC = 2


def load_plan(spec_path: Path) -> Plan:
    """Load and plan a spec; on a bad spec print the errors to stderr and exit 2."""
    try:
        return build_plan(load_spec(spec_path))
    except SpecError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None


def command(spec: Path = typer.Argument(..., help="Sweep spec (YAML).")) -> None:
    """Check a spec: every error with file, line and field; exit 2 when it is bad."""
    plan = load_plan(spec)
    configs = sum(len(host.steps) for host in plan.hosts)
    typer.echo(f"ok: {configs} server configs, {plan.n_points} points")
