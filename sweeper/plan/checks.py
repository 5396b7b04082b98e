"""What a plan must not do silently: be too large to handle, select nothing, give two different
points one id, or quietly run defaults or only the baseline.

`guard_size` counts the grid's combinations before anything is expanded, so `validate` and `plan`
answer in a moment however large the product; `same_request` is the safety net under the ids
(`model._fmt` renders every float exactly, so distinct values never share an id); `review`
refuses a plan of no points and returns the notes a reader of the plan must see.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sweeper.catalog.records import RECORDS
from sweeper.spec import REQUEST_KEYS, SERVER_KEYS, Spec

if TYPE_CHECKING:
    from sweeper.config import RequestConfig
    from sweeper.plan.model import Plan

#: Most grid combinations one spec may expand to. Every point is at least one server request
#: and a restart is seconds to minutes, so a larger grid is a typo or a job for several specs;
#: below it, expanding and validating take well under a few seconds.
MAX_COMBINATIONS = 20_000


class PlanError(ValueError):
    """A spec whose plan cannot be run; `field` names the spec section to edit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def guard_size(spec: Spec) -> None:
    """Refuse a grid of more than `MAX_COMBINATIONS` combinations, naming each axis's size."""
    grid = spec.grid
    keys = [*SERVER_KEYS, *grid.extra_flags(), *REQUEST_KEYS]
    sizes = {k: len(grid.values(k)) for k in keys}
    loads = len(spec.workload.loads())
    total = math.prod(sizes.values()) * loads
    for rule in grid.include:
        total += (
            math.prod(len(grid.rule_values(k, rule[k])) if k in rule else sizes[k] for k in keys)
            * loads
        )
    if total <= MAX_COMBINATIONS:
        return
    axes = " x ".join(f"{k} {n}" for k, n in sizes.items() if n > 1)
    raise PlanError(
        "grid",
        f"the grid expands to {total:,} combinations ({axes}"
        f"{f' x {loads} loads' if loads > 1 else ''}, before exclude rules), more than the "
        f"{MAX_COMBINATIONS:,} one sweep may hold; narrow it or split it into several specs",
    )


def same_request(kept: RequestConfig, new: RequestConfig) -> None:
    """Two request configs with one id must be the same config: otherwise one would silently
    replace the other."""
    if kept != new:
        raise PlanError(
            "grid",
            f"two different request configs get the id {new.id!r}: {kept.to_dict()} and "
            f"{new.to_dict()}",
        )


def review(plan: Plan, speculative_left: int) -> list[str]:
    """Refuse a plan of no points; notes for a grid that fell back to defaults or that runs
    only the AR baseline. `speculative_left`: speculative server configs after the rules."""
    spec = plan.spec
    if plan.n_points == 0:
        rules = " (check the exclude rules)" if spec.grid.exclude else ""
        raise PlanError("grid", f"the spec selects no points{rules}: nothing would be measured")
    later = [p.id for p in spec.workload.prompts if p.answers_from]
    if later and not spec.baseline and not spec.runtime.baseline_run:
        raise PlanError(
            "baseline",
            f"later turns ({', '.join(later[:3])}{', ...' if len(later) > 3 else ''}) hold the AR "
            "baseline's answers to the turns before them, and this sweep has no AR baseline: "
            "keep baseline: true or name runtime.baseline_run",
        )
    search = spec.search
    has_baseline = spec.baseline or spec.runtime.baseline_run
    if search is not None and "speedup" in search.objective.column and not has_baseline:
        raise PlanError(
            "search.objective",
            f"objective {search.objective.column} divides by the AR baseline, and this sweep "
            "has none: every trial would fail; keep baseline: true, name runtime.baseline_run, "
            "or score output_tok_s",
        )
    notes = []
    mapping = spec.runtime.engine_mapping()
    used = [k for k in (mapping.params if mapping else ()) if k in SERVER_KEYS]
    # A grid that names one speculative key chose the others' defaults; one that names none
    # may not know there are any.
    if used and not any(k in spec.grid.model_fields_set for k in used):
        values = ", ".join(f"{k} {spec.grid.values(k)}" for k in used)
        notes.append(f"the grid names no speculative key, so it runs the defaults: {values}")
    limit = RECORDS[spec.runtime.engine].port_limit
    env = {**spec.runtime.env, **spec.runtime.secrets}
    if limit and spec.runtime.port > limit.highest and limit.unless_env not in env:
        notes.append(
            f"runtime.port {spec.runtime.port} is above {limit.highest}: {limit.why}; pick a "
            f"lower port or set {limit.unless_env} in runtime.env"
        )
    if speculative_left == 0 and used:
        notes.append(
            "no speculative point is left (exclude rules or redundancy removed them all): "
            "this sweep measures only the AR baseline"
        )
    return notes
