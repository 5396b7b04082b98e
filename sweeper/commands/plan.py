"""`sweeper plan SPEC`: the dry run: server configs (each a load or an in-place switch), their
request configs, each config's exact command line and environment (secrets masked), notes on
dropped points, totals, per host its loads and switches, a rough time estimate with switches and
with every config a load, and a search's stop and first configs; `--json` for machine output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from sweeper.commands.commandlines import command_lines
from sweeper.commands.validate import load_plan
from sweeper.plan import (
    DEFAULT_LOAD_S,
    DEFAULT_SWITCH_S,
    DEFAULT_TOK_S,
    Plan,
    build_plan,
    estimate_seconds,
)
from sweeper.plan.model import confirmation, proof_time, provision_of
from sweeper.proof.power import planned_statement
from sweeper.proof.scored.judge import expected_power
from sweeper.search import preview
from sweeper.spec.dataset_load import dataset_sources

T = TypeVar("T")

#: Server configs (and notes) listed per host before the plan is summarised: a large grid's
#: full listing is thousands of lines nobody reads in a terminal.
SHOWN = 40


def every_config_a_load(plan: Plan, *, load_s: float, tok_s: float) -> float:
    """The estimate of the same spec with `runtime.inplace: off`: every config a load, and so
    no winner to confirm."""
    spec = plan.spec
    off = spec.model_copy(update={"runtime": spec.runtime.model_copy(update={"inplace": False})})
    return estimate_seconds(build_plan(off), load_s=load_s, tok_s=tok_s)


def command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    load_s: float = typer.Option(DEFAULT_LOAD_S, help="Assumed seconds per load (estimate)."),
    switch_s: float = typer.Option(
        DEFAULT_SWITCH_S, help="Assumed seconds per in-place switch (estimate)."
    ),
    tok_s: float = typer.Option(DEFAULT_TOK_S, help="Assumed tokens/s per stream (estimate)."),
    show_all: bool = typer.Option(
        False, "--all", help=f"List every server config (beyond {SHOWN} they are summarised)."
    ),
) -> None:
    """Show what a sweep would run, without running anything."""
    plan = load_plan(spec)
    seconds = estimate_seconds(plan, load_s=load_s, tok_s=tok_s, switch_s=switch_s)
    all_loads = every_config_a_load(plan, load_s=load_s, tok_s=tok_s)
    if as_json:
        data = plan.to_dict()
        data["estimated_seconds"] = round(seconds, 1)
        data["estimated_seconds_every_config_a_load"] = round(all_loads, 1)
        for host, plan_host in zip(data["hosts"], plan.hosts, strict=True):
            host["loads"] = plan_host.loads
            host["switches"] = len(plan_host.steps) - plan_host.loads
            confirmed = confirmation(plan_host, plan.spec, load_s, tok_s)
            host["confirmation"] = {"loads": confirmed.restarts, "points": confirmed.points}
        data["search"] = preview(plan)
        power = sampled_power(plan)
        if power:
            data["sampled_power"] = power
        proof = sampled_proof(plan)
        if proof:
            data["sampled_proof"] = proof
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
        switch_s=switch_s,
    )


def sampled_proof(plan: Plan) -> list[dict[str, Any]]:
    """Per sampled point whose proof draws samples: how many per prompt it needs, how many its
    measured requests give, how many are drawn beside them (by which point), and why."""
    out = []
    for point in plan.points():
        provision = provision_of(point, plan.spec)
        if provision.needed:
            drawn_by = point.samples_from or (point.point_id if point.samples else None)
            out.append(
                {
                    "point_id": point.point_id,
                    "needed": provision.needed,
                    "provided": provision.provided,
                    "extra": provision.extra,
                    "drawn_by": drawn_by,
                    "why": provision.why,
                }
            )
    return out


def sampled_power(plan: Plan) -> str:
    """The sampled test's expected power at the plan's sizes: the distribution test's, or the
    scored test's on the tokens of `determinism.samples` per prompt, which the measured
    requests and the samples drawn beside them hold ("" when no point's proof counts samples)."""
    sampled = [p for p in plan.points() if p.sampled_check in ("distribution", "scored")]
    check = sampled[0].sampled_check if sampled else None
    if check == "distribution" and not any(p.samples for p in sampled):
        return ""  # nothing to compare with: none drawn (the plan's note says why)
    if check not in ("distribution", "scored"):
        return ""
    policy = plan.spec.determinism
    tokens = max(policy.sample_length(p.request_config.max_tokens) for p in sampled)
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
    switch_s: float = DEFAULT_SWITCH_S,
) -> None:
    """The human view: one table per host, then notes and totals; beyond `limit` server configs
    (or notes) the rest is counted, with the command that lists them all."""
    see_all = f"sweeper plan {spec} --all" if spec else "sweeper plan SPEC --all"
    left_out = 0
    for host in plan.hosts:
        switches = len(host.steps) - host.loads
        table = Table(
            title=f"host {host.name}: {len(host.steps)} server configs: {host.loads} load(s), "
            f"{switches} in-place switch(es)"
        )
        table.add_column("#", justify="right")
        table.add_column("start")
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
                "switch" if step.switch else "load",
                step.server_config.label + (f" (also {', '.join(covers)})" if covers else ""),
                step.server_config.id,
                scores if step.scoring else ", ".join(rc.id for rc in step.request_configs),
            )
        if hidden:
            table.add_row("...", "", f"{hidden} more", "", "")
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
        proof = proof_time(plan, load_s=load_s, tok_s=tok_s, switch_s=switch_s)
        parts = [f"{plan.n_samples} seeded samples"] if plan.n_samples else []
        parts += [f"{plan.n_scores} scoring prefills"] if plan.n_scores else []
        restarts = sum(step.scoring for host in plan.hosts for step in host.steps)
        parts += [f"{restarts} scoring step(s)"] if restarts else []
        spent = [f"drawing {proof.drawing / 60:.1f}", f"scoring {proof.scoring / 60:.1f}"]
        spent += [f"scoring steps {proof.restarts / 60:.1f}"] if restarts else []
        samples = (
            f" + {', '.join(parts)} (the T > 0 proof: ~{proof.total / 60:.1f} min, in the "
            f"estimate: {', '.join(spent)})"
        )
    console.print(
        f"{plan.restarts} restarts, {plan.n_points} points, {plan.n_requests} measured requests "
        f"({per_point}, max_tokens {workload.max_tokens}){samples}",
        markup=False,
    )
    confirmed = sum(confirmation(h, plan.spec, load_s, tok_s).restarts for h in plan.hosts)
    then = (
        f"; then {confirmed} more load(s) and their points: the winner measured only after "
        "switches, measured again on a fresh process (one per host assumed)"
        if confirmed
        else ""
    )
    console.print(
        f"{plan.loads} load(s), {plan.switches} in-place switch(es) (runtime.inplace: "
        f"{'on' if plan.spec.runtime.inplace else 'off'}){then}",
        markup=False,
    )
    all_loads = every_config_a_load(plan, load_s=load_s, tok_s=tok_s)
    console.print(
        f"estimate: about {seconds / 60:.1f} min; {all_loads / 60:.1f} min with every config a "
        "load (a rough model: loads x load time + switches x switch time + requests x "
        "max_tokens / tok/s; see --load-s, --switch-s, --tok-s)",
        markup=False,
    )
