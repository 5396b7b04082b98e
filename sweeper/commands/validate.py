"""`sweeper validate SPEC`: load a spec and its plan; print a one-line summary or every error."""

from __future__ import annotations

from pathlib import Path

import typer

from sweeper.exit_codes import EXIT_BAD_SPEC
from sweeper.plan import Plan, PlanError, build_plan
from sweeper.search import plan_problems
from sweeper.spec import SpecError, load_spec, resolve_secrets

#: Notes printed by `validate` (the plan lists every one).
NOTES_SHOWN = 5


def load_plan(spec_path: Path) -> Plan:
    """Load and plan a spec; on a bad spec print the errors to stderr and exit 2."""
    try:
        plan = build_plan(load_spec(spec_path))
    except SpecError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None
    except PlanError as exc:
        typer.echo(f"{spec_path}: {exc.field}: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None
    problems = plan_problems(plan)
    for problem in problems:
        typer.echo(f"{spec_path}: {problem}", err=True)
    if problems:
        raise typer.Exit(EXIT_BAD_SPEC)
    return plan


def missing_secrets(plan: Plan) -> str | None:
    """Why the spec's secrets cannot be resolved on this machine now, or None when they can."""
    try:
        resolve_secrets(plan.spec.runtime)
    except ValueError as exc:
        return str(exc)
    return None


def command(spec: Path = typer.Argument(..., help="Sweep spec (YAML).")) -> None:
    """Check a spec: every error with file, line and field; exit 2 when it is bad."""
    plan = load_plan(spec)
    configs = sum(len(host.steps) for host in plan.hosts)
    # A spec is valid on a machine without the token; `run` refuses to start without it.
    missing = missing_secrets(plan)
    if missing:
        typer.echo(f"warning: {missing} (sweeper run needs them)", err=True)
    for note in plan.notes[:NOTES_SHOWN]:
        typer.echo(f"note: {note}", err=True)
    if len(plan.notes) > NOTES_SHOWN:
        more = len(plan.notes) - NOTES_SHOWN
        typer.echo(f"note: ... {more} more notes (sweeper plan {spec} --all)", err=True)
    typer.echo(f"ok: {configs} server configs, {plan.n_points} points")
