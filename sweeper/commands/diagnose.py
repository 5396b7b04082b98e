"""`sweeper diagnose RUN [--point ID] [--dry-run]`: which knob breaks exactness, and the
experiment that proves it.

Prints the run's diagnosis (the rule its violations live in, every factor's standing), then
plans the follow-up experiments that separate what its grid could not (`diagnosis/followup.py`)
on the run's own spec, engine, runtime and host, with their cost from the run's own load time
and throughput. `--dry-run` stops there. Otherwise the follow-up runs as a new run whose manifest
`follows` the first, and the command ends with the evidence table and a verdict sentence over
both runs. Exit codes as `sweeper run` (0, 3, 4, 130), 2 for bad usage or a runtime whose code
changed since the run (a follow-up must run the same code). The follow-up's run directory is the
last line printed.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from sweeper.commands.plan import render
from sweeper.commands.repair import checked
from sweeper.commands.run import create_store, execute, held_hosts, planned_source_hash
from sweeper.commands.validate import EXIT_BAD_SPEC
from sweeper.diagnosis.evidence import EVIDENCE_COLUMNS, evidence
from sweeper.diagnosis.followup import FollowUp, plan_followup
from sweeper.diagnosis.runs import diagnose_requests, diagnose_run, run_requests
from sweeper.diagnosis.text import TABLE_COLUMNS, sentence, table
from sweeper.plan import DEFAULT_LOAD_S, DEFAULT_TOK_S, Plan, build_plan, estimate_seconds
from sweeper.proof.sampled import proof_line, proofs
from sweeper.results.manifest import Manifest
from sweeper.results.reader import MANIFEST, is_run_dir, read_run
from sweeper.spec import Spec


def _usage(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_SPEC)


def _table(
    console: Console, title: str, columns: tuple[str, ...], rows: list[dict[str, str]]
) -> None:
    out = Table(title=title, title_justify="left")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*(row[c] for c in columns))
    console.print(out)


def measured_rates(manifest: Manifest, points: Any) -> tuple[float, float]:
    """Seconds per restart and tokens/s per stream as the run measured them (defaults else)."""
    timings = manifest.timings
    ready = sum(v for k, v in timings.items() if k.endswith(".ready_s"))
    restarts = sum(v for k, v in timings.items() if k.endswith(".restarts"))
    load_s = ready / restarts if restarts else DEFAULT_LOAD_S
    speeds: list[float] = []
    if points is not None and {"output_tok_s", "concurrency", "status"} <= set(points):
        ok = points[(points["status"] == "ok") & points["output_tok_s"].notna()]
        speeds = list(ok["output_tok_s"] / ok["concurrency"].clip(lower=1))
    return load_s, statistics.median(speeds) if speeds else DEFAULT_TOK_S


def _show_followup(console: Console, followup: FollowUp) -> None:
    if followup.focus:
        f = followup.focus
        console.print(
            f"focus: point {f.get('point_id')} on host {f.get('host')}, prompts "
            f"{', '.join(followup.prompts)}",
            markup=False,
        )
    for experiment in followup.experiments:
        arms = " vs ".join(arm.label for arm in experiment.arms)
        console.print(f"experiment {experiment.name}: {experiment.question}: {arms}", markup=False)
    for reason in followup.skipped:
        console.print(f"not planned: {reason}", markup=False)


def _write_spec(spec: Spec, root: Path, run_id: str) -> Path:
    folder = root / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"followup-of-{run_id}.yaml"
    path.write_text(
        yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True), sort_keys=False)
    )
    return path


def command(
    run_dir: Path = typer.Argument(..., help="The run directory to diagnose."),
    point: str | None = typer.Option(None, "--point", help="Follow up this point id."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the diagnosis, plan and cost."),
    results: Path | None = typer.Option(
        None, "--results", help="Results root for the follow-up (default: the run's own)."
    ),
    plain: bool = typer.Option(False, "--plain", help="Plain log lines instead of live display."),
) -> None:
    """Say which factors separate a run's violations, then plan and run the experiments that
    separate what its grid could not."""
    run = read_run(run_dir) if is_run_dir(run_dir) else None
    manifest = run.manifest if run is not None else None
    if run is None or manifest is None:
        raise _usage(f"{run_dir} is not a run directory (no readable {MANIFEST})")
    try:
        spec = Spec.model_validate(manifest.spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise _usage(
            f"{run_dir / MANIFEST}: the run's spec does not validate today ({where}: "
            f"{first['msg']}); the manifest was edited or written by another version: restore it"
        ) from None
    run = checked(run)
    console = Console(width=None if sys.stdout.isatty() else 160, markup=False)
    requests, kinds = run_requests([run])
    found = diagnose_requests(requests, kinds)
    console.print(f"diagnosis of {run_dir}:", markup=False, style="bold")
    console.print(sentence(found), markup=False)
    _table(console, "factors (broken/judged)", TABLE_COLUMNS, table(found))
    points = run.points
    checked_samples = proofs(points.to_dict("records")) if points is not None else []
    if checked_samples:
        console.print("sampled points (temperature > 0), how each was proven:", markup=False)
        for proof in checked_samples:
            console.print(f"  {proof_line(proof)}", markup=False, soft_wrap=True)
    try:
        followup = plan_followup(spec, found, requests, point)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    _show_followup(console, followup)
    if followup.spec is None:
        console.print("nothing to follow up", markup=False)
        return
    plan: Plan = build_plan(followup.spec)
    load_s, tok_s = measured_rates(manifest, run.points)
    seconds = estimate_seconds(plan, load_s=load_s, tok_s=tok_s)
    render(plan, seconds, console)
    console.print(
        f"cost: {plan.restarts} restarts, {plan.n_points} points, {plan.n_requests} requests, "
        f"about {seconds / 60:.1f} min (at the run's own {load_s:.0f} s per restart and "
        f"{tok_s:.1f} tok/s per stream)",
        markup=False,
    )
    if dry_run:
        return
    if planned_source_hash(plan) != manifest.runtime_source_hash:
        raise _usage(
            "the runtime's code changed since the run (source hash "
            f"{planned_source_hash(plan)[:12]} vs the run's {manifest.runtime_source_hash[:12]}): "
            "a follow-up must run the code the run ran"
        )
    root = results or run_dir.parent.parent
    spec_path = _write_spec(followup.spec, root, manifest.run_id)
    with held_hosts(plan, None) as leases:  # its servers start on the run's hosts
        store = create_store(plan, spec_path, root, follows=str(run_dir))
        code = execute(plan, store, plain, leases)
    follow_up = read_run(store.dir)
    followed, _ = run_requests([follow_up])
    combined = diagnose_run(run, follow_up)
    rule = [t.condition for t in combined.rule] if combined is not None else []
    rows = evidence(followup.experiments, followed, rule)
    _table(
        console,
        "evidence (in the rule / outside it: of the run and its follow-up)",
        EVIDENCE_COLUMNS,
        rows,
    )
    for name, shown in dict.fromkeys((r["experiment"], r["shows"]) for r in rows):
        console.print(f"experiment {name}: {shown}", markup=False, soft_wrap=True)
    if combined is not None:
        console.print("verdict over the run and its follow-up: " + sentence(combined), markup=False)
    sys.stdout.write(f"{store.dir}\n")
    sys.stdout.flush()
    raise typer.Exit(code)
