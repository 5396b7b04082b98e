"""`sweeper diagnose RUN [--point ID] [--dry-run]`: which knob breaks exactness, and the
experiment that proves it.

Prints the run's diagnosis (the rule its violations live in, every factor's standing), then
plans the follow-up experiments that separate what its grid could not (`diagnosis/followup.py`)
on the run's own spec, engine, runtime and host, with their cost from the run's own load time
and throughput. `--dry-run` stops there. Otherwise the follow-up runs as new runs whose manifests
`follow` the first (one per spec: the run's own workload, then one per ablated workload feature),
and the command ends with the evidence table and a verdict sentence over them all. Exit codes as
`sweeper run` (0, 3, 4, 130: the worst of the follow-up's runs), 2 for bad usage or a runtime
whose code changed since the run (a follow-up must run the same code). The follow-up's run
directories are the last lines printed.
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
from sweeper.diagnosis.evidence import EVIDENCE_COLUMNS, evidence, verdict
from sweeper.diagnosis.followup import plan_followup, plan_lines
from sweeper.diagnosis.runs import diagnose_requests, diagnose_run, run_requests
from sweeper.diagnosis.text import TABLE_COLUMNS, sentence, table
from sweeper.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNPROVEN, EXIT_VIOLATION
from sweeper.plan import DEFAULT_LOAD_S, DEFAULT_TOK_S, build_plan, estimate_seconds
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
    """Seconds per load and tokens/s per stream as the run measured them (defaults else); a
    run written before loads were counted apart from switches counted its loads as `restarts`."""
    timings = manifest.timings
    ready = sum(v for k, v in timings.items() if k.endswith(".ready_s"))
    loads = sum(v for k, v in timings.items() if k.endswith((".loads", ".restarts")))
    load_s = ready / loads if loads else DEFAULT_LOAD_S
    speeds: list[float] = []
    if points is not None and {"output_tok_s", "concurrency", "status"} <= set(points):
        ok = points[(points["status"] == "ok") & points["output_tok_s"].notna()]
        speeds = list(ok["output_tok_s"] / ok["concurrency"].clip(lower=1))
    return load_s, statistics.median(speeds) if speeds else DEFAULT_TOK_S


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
    for line in plan_lines(followup):
        console.print(line, markup=False)
    if not followup.specs:
        console.print("nothing to follow up", markup=False)
        return
    plans = [build_plan(followup_spec) for followup_spec in followup.specs]
    load_s, tok_s = measured_rates(manifest, run.points)
    seconds = [estimate_seconds(plan, load_s=load_s, tok_s=tok_s) for plan in plans]
    for plan, estimate in zip(plans, seconds, strict=True):
        render(plan, estimate, console)
    console.print(
        f"cost: {len(plans)} run{'s' if len(plans) > 1 else ''}, "
        f"{sum(p.restarts for p in plans)} restarts, {sum(p.n_points for p in plans)} points, "
        f"{sum(p.n_requests for p in plans)} requests, about {sum(seconds) / 60:.1f} min (at the "
        f"run's own {load_s:.0f} s per restart and {tok_s:.1f} tok/s per stream)",
        markup=False,
    )
    if dry_run:
        return
    for plan in plans:
        if planned_source_hash(plan) != manifest.runtime_source_hash:
            raise _usage(
                "the runtime's code changed since the run (source hash "
                f"{planned_source_hash(plan)[:12]} vs the run's "
                f"{manifest.runtime_source_hash[:12]}): a follow-up must run the code the run ran"
            )
    root = results or run_dir.parent.parent
    follow_ups, codes = [], []
    # Its servers start on the run's host, every spec's the same: held once for them all.
    with held_hosts(plans[0], None) as leases:
        for plan in plans:  # the run's own workload first, then each ablation: a run each
            spec_path = _write_spec(plan.spec, root, manifest.run_id)
            store = create_store(plan, spec_path, root, follows=str(run_dir))
            codes.append(execute(plan, store, plain, leases))
            follow_ups.append(read_run(store.dir))
            if codes[-1] == EXIT_INTERRUPTED:
                break
    followed, _ = run_requests(follow_ups)
    combined = diagnose_run(run, *follow_ups)
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
        over = verdict(combined, followup.experiments, followed)
        console.print(f"verdict over the run and its follow-up: {over}", markup=False)
    for follow_up in follow_ups:
        sys.stdout.write(f"{follow_up.dir}\n")
    sys.stdout.flush()
    raise typer.Exit(_worst(codes))


#: A run's own exit codes, least to most severe; any other (an interrupt, an I/O error) wins.
_SEVERITY = (EXIT_OK, EXIT_UNPROVEN, EXIT_FAILED, EXIT_VIOLATION)


def _worst(codes: list[int]) -> int:
    """The exit code of a follow-up of several runs: the most severe of theirs."""
    return max(codes, key=lambda c: _SEVERITY.index(c) if c in _SEVERITY else len(_SEVERITY) + c)
