"""`sweeper best RUN`: the winning speculative config per load level (request config), with its
spread over restarts and the runner-up; never a config with a determinism violation (near-ties
above the AR-vs-AR control included) and never one that is unproven (a point of it compared
with nothing: no baseline, unseeded, a distribution test too weak), whose reason is listed. No
winner is named when the first two are inside each other's noise (their intervals overlap).
A speedup objective is withheld where it is no result (a busy host, a drifted baseline measured
once, or impossible: above the point's tau), with the reason; the lines at the top say why.

A config measured only after in-place switches is named no winner until a fresh process of it
is measured (`runtime.inplace`): the line says how to confirm it.

The objective defaults to the run's `search.objective`, else output_tok_s maximized;
`--objective COLUMN[:min|:max]` and `--at REQUEST_CONFIG` override it. Exit 0 with a winner
somewhere, 3 when no config is feasible anywhere, 2 on bad usage.
"""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import ValidationError

from sweeper.analysis.best import Entry, Ranking, rank, served_rows
from sweeper.analysis.drift import baseline_drift, drift_line
from sweeper.analysis.impossible import impossible_lines
from sweeper.analysis.objective import Interval, Score
from sweeper.commands.repair import checked
from sweeper.commands.validate import EXIT_BAD_SPEC
from sweeper.exit_codes import EXIT_FAILED
from sweeper.proof.calibration import calibrated_frame
from sweeper.results.reader import MANIFEST, is_run_dir, read_run, run_state
from sweeper.spec.search import ObjectiveSpec, SearchSpec

#: No config may win (each failed, is infeasible or unproven): the table's "a point failed".
EXIT_NONE_FEASIBLE = EXIT_FAILED


def command(
    run: Path = typer.Argument(..., help="Run directory."),
    objective: str | None = typer.Option(
        None, "--objective", help="Point column to rank by, e.g. e2e_speedup or ttft_p90:min."
    ),
    at: list[str] = typer.Option([], "--at", help="Request config id (t0-c8); repeatable."),
) -> None:
    """Which config wins at each load, by how much, and which comes second."""
    if not is_run_dir(run):
        typer.echo(f"error: {run} is not a run directory (no {MANIFEST})", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    loaded = checked(read_run(run))
    manifest, points = loaded.manifest, loaded.points
    if manifest is None or points is None:
        typer.echo(f"error: {run} is not a run directory with points", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    search = SearchSpec.model_validate(manifest.spec.get("search") or {})
    chosen, constraints = search.objective, search.constraints
    if objective is not None:
        column, _, goal = objective.partition(":")
        goals = {"": chosen.goal, "max": "maximize", "min": "minimize"}
        if goal not in goals:
            typer.echo(f"error: --objective {objective}: the goal is :min or :max", err=True)
            raise typer.Exit(EXIT_BAD_SPEC)
        try:
            chosen = ObjectiveSpec(column=column, goal=goals[goal])
        except ValidationError as exc:
            typer.echo(f"error: --objective {objective}: {exc.errors()[0]['msg']}", err=True)
            raise typer.Exit(EXIT_BAD_SPEC) from None
    points = calibrated_frame(points, loaded)  # near-ties above the control are violations
    identities = {where: i.model_dump() for where, i in manifest.identities.items()}
    rows = served_rows(points.to_dict("records"), identities)
    try:
        rankings = rank(rows, chosen, constraints, at or None)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None
    typer.echo(
        f"{chosen.goal} {chosen.column}; only configs proven right at every point can win "
        f"(exact, near-tie or distribution-ok: {run})"
    )
    if manifest.status != "complete":
        state = run_state(run, manifest.status)
        typer.echo(
            f"note: this run is {state}, not complete ({manifest.points_done} of "
            f"{manifest.points_total} points recorded): the ranking covers only those"
        )
    records = points.to_dict("records")
    for line in [drift_line(baseline_drift(records)), *impossible_lines(records)]:
        if line:
            typer.echo(line)
    for ranking in rankings:
        for line in render(ranking):
            typer.echo(line)
    if not any(r.ranked for r in rankings):
        raise typer.Exit(EXIT_NONE_FEASIBLE)


def render(ranking: Ranking) -> list[str]:
    """A load level in a few lines: winner (or the tie), runner-up, baseline, excluded."""
    first = ranking.ranked[0] if ranking.ranked else None
    if first is None:
        head = f"{ranking.at}: no feasible config"
    elif ranking.unconfirmed:
        head = (
            f"{ranking.at}: no winner yet: {_entry(first)} was measured only after in-place "
            "switches, and the run ended before a fresh process of it was measured (resume it)"
        )
    elif ranking.tied:
        second = ranking.ranked[1]
        head = (
            f"{ranking.at}: no winner inside the noise: {_entry(first)} and {_entry(second)} "
            "overlap"
        )
    else:
        head = f"{ranking.at}: winner {_entry(first)}"
        if ranking.runner_up is not None:
            head += f"; runner-up {_entry(ranking.runner_up)}"
    if ranking.baseline is not None and ranking.baseline.value is not None:
        head += f"; AR {_value(ranking.baseline)}"
    lines = [head]
    for entry in ranking.excluded:
        lines.append(f"  {entry.label}: {entry.score.state} ({entry.score.reason})")
    for entry in ranking.ranked:
        if entry.score.regimes:
            lines.append(f"  {entry.label}: restarts fall into separate regimes {_samples(entry)}")
    return lines


def _entry(entry: Entry) -> str:
    busy = " (busy host)" if entry.score.busy else ""
    return f"{entry.label} {_value(entry.score)}{busy}"


def _value(score: Score) -> str:
    interval = score.interval
    if interval is None:
        return "-"
    return f"{interval.mean:.4g}{_spread(interval)}"


def _spread(interval: Interval) -> str:
    if interval.low is None or interval.high is None:
        return f" (n={interval.n}, no interval)"
    cv = f", CV {100 * interval.cv:.1f}%" if interval.cv is not None else ""
    return f" [95% CI {interval.low:.4g}-{interval.high:.4g}, n={interval.n}{cv}]"


def _samples(entry: Entry) -> str:
    return "(" + ", ".join(f"{v:.4g}" for v in entry.score.samples) + ")"
