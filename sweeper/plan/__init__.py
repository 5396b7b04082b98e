"""The plan: a spec's grid expanded into server configs (loads and in-place switches) and
request configs.

`build_plan(spec)` is the entry point; the configs themselves are `sweeper.config`'s, the points
`points.py`, the plan's hosts, steps and totals `model.py`.
"""

from sweeper.plan.build import build_plan
from sweeper.plan.checks import MAX_COMBINATIONS, PlanError
from sweeper.plan.model import (
    DEFAULT_LOAD_S,
    DEFAULT_SWITCH_S,
    DEFAULT_TOK_S,
    HostPlan,
    Plan,
    Step,
    estimate_seconds,
    point_requests_count,
    step_seconds,
)
from sweeper.plan.points import Point

__all__ = [
    "DEFAULT_LOAD_S",
    "DEFAULT_SWITCH_S",
    "DEFAULT_TOK_S",
    "MAX_COMBINATIONS",
    "HostPlan",
    "Plan",
    "PlanError",
    "Point",
    "Step",
    "build_plan",
    "estimate_seconds",
    "point_requests_count",
    "step_seconds",
]
