"""What `plan` and `run --dry-run` say about a search: strategy, objective, its stop against the
grid's restarts, and the configs it will try first (computed by the same strategy, seed and
space the run uses, with no measurement: for `tpe` its random start-up trials)."""

from __future__ import annotations

from sweeper.analysis.objective import Score
from sweeper.plan import Plan
from sweeper.search.space import Space
from sweeper.search.strategies import make_strategy


def preview(plan: Plan, first: int = 8) -> list[str]:
    """Lines describing the plan's search (empty without one)."""
    search = plan.spec.search
    if search is None:
        return []
    objective = search.objective
    at = ", ".join(objective.at) or "every request config"
    lines = [
        f"search: {search.strategy}, {objective.goal} {objective.column} at {at}; "
        "exactness (temperature 0: exact or near-tie) is a hard constraint"
        + ("; the SLO too" if search.constraints.slo else "")
    ]
    restarts = plan.restarts
    stop = search.stop
    if stop is None:
        lines.append(f"stop: none (up to the grid's {restarts} restarts)")
    else:
        parts = []
        if stop.restarts is not None:
            share = 100 * stop.restarts / restarts if restarts else 0
            parts.append(f"{stop.restarts} restarts of the grid's {restarts} ({share:.0f}%)")
        if stop.hours is not None:
            parts.append(f"{stop.hours:g} h")
        lines.append("stop: " + " or ".join(parts) + ", the AR baseline's restart included")
    for host in plan.hosts:
        space = Space.of(host)
        strategy = make_strategy(space, search, None, f"preview-{host.name}")
        tried = []
        count = min(first, search.startup_trials) if search.strategy == "tpe" else first
        for _ in range(count):
            step = strategy.ask()
            if step is None:
                break
            tried.append(step.server_config.label)
            strategy.tell(step, Score("ok"))  # no value: nothing is learnt, only dedup
        more = " (then by the model)" if search.strategy == "tpe" else ""
        lines.append(
            f"{host.name}: {len(space.baselines)} AR baseline(s) first, then of "
            f"{len(space.candidates)} candidates: {', '.join(tried) or 'none'}{more}"
        )
    return lines


def plan_problems(plan: Plan) -> list[str]:
    """What in the search names something the plan does not have (request configs of `at`)."""
    search = plan.spec.search
    if search is None:
        return []
    known = {rc.id for host in plan.hosts for step in host.steps for rc in step.request_configs}
    return [
        f"search.objective.at[{index}]: no request config {name!r} in the plan "
        f"(it has {', '.join(sorted(known))})"
        for index, name in enumerate(search.objective.at)
        if name not in known
    ]
