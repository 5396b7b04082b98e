"""The plan: a spec's grid expanded into server configs (restarts) and request configs.

`build_plan(spec)` is the entry point; the configs and points live in `configs.py`, the plan's
hosts, steps and totals in `model.py`.
"""

from sweeper.plan.build import build_plan
from sweeper.plan.checks import MAX_COMBINATIONS, PlanError
from sweeper.plan.configs import Mode, Point, RequestConfig, ServerConfig, point_id
from sweeper.plan.model import (
    DEFAULT_LOAD_S,
    DEFAULT_TOK_S,
    HostPlan,
    Plan,
    Step,
    estimate_seconds,
    point_requests_count,
    step_seconds,
)

__all__ = [
    "DEFAULT_LOAD_S",
    "DEFAULT_TOK_S",
    "MAX_COMBINATIONS",
    "HostPlan",
    "Mode",
    "Plan",
    "PlanError",
    "Point",
    "RequestConfig",
    "ServerConfig",
    "Step",
    "build_plan",
    "estimate_seconds",
    "point_id",
    "point_requests_count",
    "step_seconds",
]
