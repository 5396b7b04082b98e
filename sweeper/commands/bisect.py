"""`sweeper bisect SPEC --good REV --bad REV`: the first commit of the runtime's history where
the chosen points go bad (exactness by default, or speed with `--metric output_tok_s`).

Each commit's tree is written under the bisect's directory (the user's checkout is never
touched) and measured as an ordinary run of the spec cut down to the reproducing points; the
state and log go to `bisect.json` there. The walk follows first parents (`--all-parents` walks
into a merged branch the answer names). Exit codes come from `sweeper.exit_codes` (the walk's
are in `sweeper.bisect.walk`): 0 answered, 2 bad usage (or a resume of another question), 3 an
end could not be judged, 5 a damaged bisect state, 6 too noisy to decide, 7 the ends are not as
claimed, 75 another bisect of the question is running, 130 interrupted (`--resume` continues
without measuring a finished commit again).
"""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType
from typing import cast

import typer
from pydantic import ValidationError

from sweeper.bisect.history import GitError
from sweeper.bisect.search import steps_bound
from sweeper.bisect.setup import (
    BisectUsage,
    bisect_dir,
    choose_points,
    new_state,
    source_of,
    start_state,
)
from sweeper.bisect.speed import THRESHOLD_BELOW, percent
from sweeper.bisect.state import BisectStateError, Metric
from sweeper.bisect.step import step_spec
from sweeper.bisect.walk import Walk
from sweeper.commands.compare import threshold_option
from sweeper.commands.run import input_paths
from sweeper.commands.validate import load_plan
from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_IO, EXIT_LOCKED
from sweeper.plan import build_plan, estimate_seconds
from sweeper.results.lock import LockBusy, run_lock
from sweeper.results.pinned import file_hashes
from sweeper.spec import Spec
from sweeper.spec.model import RepeatsSpec

#: Restarts per step under `output_tok_s` when the spec asks for fewer: an interval needs 2,
#: and with 3 the 95% t quantile falls from 12.7 to 4.3.
SPEED_RESTARTS = 3


def _usage(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_SPEC)


def starts_option(text: str | None) -> int | None:
    """`--restarts N`: a whole number within `repeats.restarts`' bounds, or exit 2 naming
    the option (never a schema dump under another option's name)."""
    if text is None:
        return None
    try:
        return RepeatsSpec.model_validate({"restarts": int(text.strip())}).restarts
    except (ValueError, ValidationError):
        bounds = {type(m).__name__: m for m in RepeatsSpec.model_fields["restarts"].metadata}
        low, high = getattr(bounds.get("Ge"), "ge", 1), getattr(bounds.get("Le"), "le", "")
        raise _usage(
            f"--restarts {text!r}: starts per commit, a whole number {low} to {high}"
        ) from None


def command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML) whose runtime's history to walk."),
    good: str = typer.Option(..., "--good", help="A revision known good."),
    bad: str = typer.Option(..., "--bad", help="A later revision known bad."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    metric: str = typer.Option("verdict", "--metric", help="verdict (exactness) or output_tok_s."),
    threshold: str = typer.Option(
        "10%", "--threshold", help="output_tok_s: slower by more than this."
    ),
    points: str | None = typer.Option(
        None, "--points", help="Point ids (comma-separated) to measure."
    ),
    from_run_dir: Path | None = typer.Option(
        None, "--from-run", help="Reproduce this run's violations."
    ),
    repo: Path | None = typer.Option(None, "--repo", help="The git repository of the runtime."),
    restarts: str | None = typer.Option(None, "--restarts", help="Starts per commit."),
    resume: bool = typer.Option(False, "--resume", help="Continue this range's bisect."),
    all_parents: bool = typer.Option(
        False, "--all-parents", help="Walk into a merged branch the first-parent walk names."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the steps it would take."),
) -> None:
    """Find the first commit of the runtime where the chosen points go bad."""
    if metric not in ("verdict", "output_tok_s"):
        raise _usage(f"--metric {metric!r}: verdict or output_tok_s")
    fraction = (
        threshold_option(threshold, above_zero=True, below=THRESHOLD_BELOW)
        if metric == "output_tok_s"
        else None
    )
    asked_starts = starts_option(restarts)
    plan = load_plan(spec)
    try:
        source = source_of(plan.spec, repo, bad)
        good_sha, bad_sha = source.resolve(good), source.resolve(bad)
        commits = source.commits(good_sha, bad_sha)
        chosen = choose_points(plan, points, from_run_dir, results, metric)
    except (GitError, BisectUsage) as exc:
        raise _usage(str(exc)) from None
    if not commits:
        raise _usage(f"{good} and {bad} are the same commit: nothing to bisect")
    wanted = plan.spec.repeats.restarts
    starts = asked_starts or (max(wanted, SPEED_RESTARTS) if metric == "output_tok_s" else wanted)
    data = step_spec(plan.spec, chosen.points, chosen.prompts, starts)
    try:  # the cut must plan (unknown point ids are named here, before anything runs)
        step_plan = build_plan(
            Spec.model_validate({**data, "runtime": {**data["runtime"], "package": None}})
        )
    except ValueError as exc:
        raise _usage(f"--points: {exc}") from None
    fresh = new_state(
        spec,
        plan,
        file_hashes(input_paths(plan, spec)),
        source,
        commits,
        cast(Metric, metric),
        fraction,
        starts,
        chosen,
        all_parents,
    )
    directory = bisect_dir(results, fresh)
    bound = steps_bound(len(commits))
    per_step = estimate_seconds(step_plan)
    say = lambda line: typer.echo(line, err=True)  # noqa: E731
    merges = sum(len(c.parents) > 1 for c in commits)
    say(
        f"bisect {plan.spec.name}: {len(commits)} commit(s) after {good_sha[:10]} up to "
        f"{bad_sha[:10]} along first parents in {source.repo}"
        + (f"/{source.prefix}" if source.prefix else "")
        + (
            f" ({merges} merge(s): "
            + ("a merge named is walked into" if all_parents else "--all-parents walks into one")
            + ")"
            if merges
            else ""
        )
    )
    say(
        f"metric {metric}"
        + (f", threshold {percent(fraction)}" if fraction else "")
        + f"; {starts} start(s) per commit"
    )
    say(
        f"points ({chosen.origin}): {', '.join(chosen.points)}"
        + (f"; prompts {', '.join(chosen.prompts)}" if chosen.prompts else "")
    )
    say(
        f"at most {bound} measured steps without skips (both ends + ceil(log2 {len(commits)})), "
        f"each ~{per_step / 60:.1f} min: ~{bound * per_step / 60:.0f} min"
    )
    if dry_run:
        order = [("good end", good_sha), ("bad end", bad_sha)]
        lo, hi = -1, len(commits) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            order.append((f"step {len(order) - 1}", commits[mid].sha))
            hi = mid  # shown as if every step were bad: the search's first path
        for role, sha in order:
            say(f"  {role}: {sha[:10]}")
        typer.echo(str(directory))
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # a kill stops the step cleanly
    try:
        with run_lock(directory.parent / f".{directory.name}.lock"):
            try:
                directory, state = start_state(results, resume, fresh)
            except BisectUsage as exc:
                raise _usage(str(exc)) from None
            walk = Walk(state, directory, source, data, plan.spec.name, say)
            code = walk.run()
    except LockBusy as exc:
        typer.echo(f"error: another bisect of this question is running (pid {exc.pid})", err=True)
        raise typer.Exit(EXIT_LOCKED) from None
    except BisectStateError as exc:  # its bisect.json, or a step's tree, damaged or edited
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_IO) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    typer.echo(str(directory))
    raise typer.Exit(code)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
