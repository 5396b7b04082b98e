"""`sweeper plan SPEC`: the dry run: server configs (restarts), their request configs, each
config's exact command line and environment (secrets masked), notes on dropped points, totals and
a rough time estimate, and a search's stop and first configs; `--json` for machine output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.table import Table

from sweeper.commands.commandlines import command_lines
from sweeper.commands.validate import load_plan
from sweeper.plan import DEFAULT_LOAD_S, DEFAULT_TOK_S, Plan, estimate_seconds
from sweeper.plan.model import proof_seconds
from sweeper.proof.power import planned_statement
from sweeper.proof.scored.judge import expected_power
from sweeper.search import preview
from sweeper.spec.dataset_load import dataset_sources

T = TypeVar("T")

#: Server configs (and notes) listed per host before the plan is summarised: a large grid's
#: full listing is thousands of lines nobody reads in a terminal.
SHOWN = 40


def command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    load_s: float = typer.Option(DEFAULT_LOAD_S, help="Assumed seconds per restart (estimate)."),
    tok_s: float = typer.Option(DEFAULT_TOK_S, help="Assumed tokens/s per stream (estimate)."),
    show_all: bool = typer.Option(
        False, "--all", help=f"List every server config (beyond {SHOWN} they are summarised)."
    ),
) -> None:
    """Show what a sweep would run, without running anything."""
    plan = load_plan(spec)
    seconds = estimate_seconds(plan, load_s=load_s, tok_s=tok_s)
    if as_json:
        data = plan.to_dict()
        data["estimated_seconds"] = round(seconds, 1)
        data["search"] = preview(plan)
        power = sampled_power(plan)
        if power:
            data["sampled_power"] = power
        data["datasets"] = dataset_sources(plan.spec.workload, spec.resolve().parent)
        data["commands"] = [
            {"host": c.host, "label": c.label, "argv": list(c.argv), "env": c.env}
            for c in command_lines(plan)
        ]
        typer.echo(json.dumps(data, indent=2))
        return
    render(
        plan,
        seconds,
        Console(markup=False),
        limit=None if show_all else SHOWN,
        spec=spec,
        tok_s=tok_s,
        load_s=load_s,
    )


def sampled_power(plan: Plan) -> str:
    """The sampled test's expected power at the plan's sizes: the distribution test's, or the
    scored test's on the tokens each config's samples hold ("" when no point draws samples)."""
    drawing = [p for p in plan.points() if p.samples]
    check = drawing[0].sampled_check if drawing else None
    if check not in ("distribution", "scored"):
        return ""
    policy = plan.spec.determinism
    tokens = max(policy.sample_length(p.request_config.max_tokens) for p in drawing)
    prompts = len(plan.spec.workload.prompts)
    if check == "scored":
        return expected_power(prompts * policy.samples * tokens, policy).text()
    line, _ = planned_statement(prompts, tokens, policy.samples, policy.alpha, policy.max_shift)
    return line


def _cut(items: list[T], limit: int | None) -> tuple[list[T], int]:
    """The first `limit` items and how many were left out."""
    if limit is None or len(items) <= limit:
        return items, 0
    return items[:limit], len(items) - limit


def render(
    plan: Plan,
    seconds: float,
    console: Console,
    *,
    limit: int | None = SHOWN,
    spec: Path | None = None,
    tok_s: float = DEFAULT_TOK_S,
    load_s: float = DEFAULT_LOAD_S,
) -> None:
    """The human view: one table per host, then notes and totals; beyond `limit` server configs
    (or notes) the rest is counted, with the command that lists them all."""
    see_all = f"sweeper plan {spec} --all" if spec else "sweeper plan SPEC --all"
    left_out = 0
    for host in plan.hosts:
        table = Table(title=f"host {host.name}: {len(host.steps)} server configs (restarts)")
        table.add_column("#", justify="right")
        table.add_column("server config")
        table.add_column("id")
        table.add_column("request configs")
        steps, hidden = _cut(list(host.steps), limit)
        left_out += hidden
        for number, step in enumerate(steps, start=1):
            covers = step.server_config.covers
            scores = f"scores the samples of {len(host.scored_by(step))} point(s)"
            table.add_row(
                str(number),
                step.server_config.label + (f" (also {', '.join(covers)})" if covers else ""),
                step.server_config.id,
                scores if step.scoring else ", ".join(rc.id for rc in step.request_configs),
            )
        if hidden:
            table.add_row("...", f"{hidden} more", "", "")
        console.print(table)
    lines, hidden = _cut(command_lines(plan), limit)
    for line in lines:
        console.print(f"{line.host} {line.label}:", markup=False, style="bold")
        console.print(f"  {line.shell}", markup=False, soft_wrap=True)
        for name, value in line.env.items():
            console.print(f"  env {name}={value}", markup=False, soft_wrap=True)
    if hidden:
        console.print(f"... {hidden} more command lines", markup=False)
    notes, hidden_notes = _cut(list(plan.notes), limit)
    for note in notes:
        console.print(f"note: {note}", markup=False)
    if hidden_notes:
        console.print(f"note: ... {hidden_notes} more notes", markup=False)
    if left_out or hidden or hidden_notes:
        console.print(
            f"summarised: {left_out} server configs not listed; {see_all} lists every one "
            "(--json for machine output)",
            markup=False,
            soft_wrap=True,
        )
    for said in preview(plan):
        console.print(said, markup=False, soft_wrap=True)
    power = sampled_power(plan)
    if power:
        console.print(power, markup=False, soft_wrap=True)
    workload = plan.spec.workload
    base = spec.resolve().parent if spec is not None else Path.cwd()
    for source in dataset_sources(workload, base):
        title = f" ({source['title']})" if source["title"] else ""
        console.print(
            f"dataset {source['dataset']}{title}: {source['source']}, {source['items']} items "
            f"({source['prompts']} prompts), licence {source['licence']}",
            markup=False,
            soft_wrap=True,
        )
    per_point = f"{len(workload.prompts)} prompts x {workload.repeats} repeats per closed loop"
    load = workload.load
    if load is not None:
        length = "prompts x repeats"
        if load.requests is not None:
            length = f"{load.requests} arrivals"
        elif load.duration_s is not None:
            length = f"{load.duration_s:g} s of arrivals"
        per_point += f"; {length} per open loop, {load.arrival} arrivals"
    samples = ""
    if plan.n_samples or plan.n_scores:
        proof = proof_seconds(plan, load_s=load_s, tok_s=tok_s)
        parts = [f"{plan.n_samples} seeded samples"] if plan.n_samples else []
        parts += [f"{plan.n_scores} scoring prefills"] if plan.n_scores else []
        restarts = sum(step.scoring for host in plan.hosts for step in host.steps)
        parts += [f"{restarts} scoring restart(s)"] if restarts else []
        samples = f" + {', '.join(parts)} (the T > 0 proof: ~{proof / 60:.1f} min, in the estimate)"
    console.print(
        f"{plan.restarts} restarts, {plan.n_points} points, {plan.n_requests} measured requests "
        f"({per_point}, max_tokens {workload.max_tokens}){samples}",
        markup=False,
    )
    console.print(
        f"estimate: about {seconds / 60:.1f} min (a rough model: restarts x load time + "
        "requests x max_tokens / tok/s; see --load-s, --tok-s)",
        markup=False,
    )
