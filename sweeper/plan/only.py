"""`only:` a plan cut down to the points it names and what they need: their restarts, the AR
points they are compared with (exactness and speed baselines) and the points whose samples they
share. The reproducer a bisect measures at every commit is such a cut of the user's own spec, so
its points keep the ids, baselines and judgement of the full sweep."""

from __future__ import annotations

from collections.abc import Iterable

from sweeper.config import first_restart_label, point_id
from sweeper.plan.checks import PlanError
from sweeper.plan.model import HostPlan, Step
from sweeper.plan.points import Point


def base_point_id(point: Point) -> str:
    """A point's id with its restart left out: the id every restart of it answers to."""
    label = first_restart_label(point.server_config.label)
    return point_id(point.host, label, point.request_config.id)


def only_points(hosts: Iterable[HostPlan], wanted: Iterable[str]) -> tuple[HostPlan, ...]:
    """The host plans keeping only the `wanted` points (a base id keeps every restart, a
    restart's own id that restart) and what they depend on;
    an id the plan does not hold is a `PlanError` naming it and the ones it does hold."""
    hosts = tuple(hosts)
    wanted = list(dict.fromkeys(wanted))
    points = [p for h in hosts for p in h.points()]
    known = {base_point_id(p) for p in points}
    unknown = [w for w in wanted if w not in known | {p.point_id for p in points}]
    if unknown:
        shown = ", ".join(sorted(known)[:12]) + (" ..." if len(known) > 12 else "")
        raise PlanError("only", f"no point {', '.join(unknown)} in this plan (it has: {shown})")
    keep = {p.point_id for p in points if base_point_id(p) in wanted or p.point_id in wanted}
    needs = {
        p.point_id: {
            n for n in (p.baseline_point_id, p.speed_baseline_point_id, p.samples_from) if n
        }
        for p in points
    }
    grown = keep
    while grown:  # what the kept points need, and what that needs in turn
        grown = set().union(*(needs[k] for k in grown)) - keep
        keep |= grown
    out = []
    for host in hosts:
        steps = []
        for step in host.steps:
            label = step.server_config.label
            kept = tuple(
                rc for rc in step.request_configs if point_id(host.name, label, rc.id) in keep
            )
            if kept:
                steps.append(Step(step.server_config, kept))
        if steps:
            out.append(HostPlan(host.host, tuple(steps), host.checks))
    return tuple(out)
