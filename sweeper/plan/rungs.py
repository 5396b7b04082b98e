"""Successive halving's rungs as arithmetic, so the plan can promise an upper bound.

A rung of `size` scored configs keeps the best ceil(size / eta) for the next, each on a fresh
restart measured eta times longer, until one is left (`sweeper.search.strategies.Halving` asks
`next_rung` at every promotion). Every config of every rung feasible is the most a halving
search can restart: the plan counts those extra restarts, their points and their longer
measurements, so `plan`, the progress total and the estimate are bounds the run never passes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from sweeper.plan.model import HostPlan
    from sweeper.spec import Spec


def next_rung(size: int, eta: int) -> int | None:
    """How many of a rung of `size` scored configs go on (None: the search ends there)."""
    keep = math.ceil(size / eta)
    return keep if size >= 2 and keep < size else None


def rung_sizes(candidates: int, eta: int) -> list[int]:
    """The largest each rung can be: every candidate, then each promotion's share."""
    sizes = [candidates] if candidates else []
    while sizes and (keep := next_rung(sizes[-1], eta)) is not None:
        sizes.append(keep)
    return sizes


class Extra(NamedTuple):
    """What a host's halving rungs past the first add at most."""

    restarts: int = 0
    points: int = 0
    seconds: float = 0.0


def halving_extra(host: HostPlan, spec: Spec, load_s: float, tok_s: float) -> Extra:
    """The later rungs' restarts, points and time on one host (nothing without halving)."""
    from sweeper.plan.model import step_seconds

    search = spec.search
    if search is None or search.strategy != "halving":
        return Extra()
    candidates = [
        s for s in host.steps if s.server_config.mode != "ar" and s.server_config.restart == 0
    ]
    if not candidates:
        return Extra()
    widest = max(candidates, key=lambda s: step_seconds(spec, s, load_s=load_s, tok_s=tok_s))
    whole = step_seconds(spec, widest, load_s=load_s, tok_s=tok_s)
    measured = whole - load_s - spec.workload.warmup * spec.workload.max_tokens / tok_s
    extra = Extra()
    for rung, size in enumerate(rung_sizes(len(candidates), search.eta)[1:], start=1):
        seconds = size * (whole - measured + measured * search.eta**rung)
        points = size * len(widest.request_configs)
        extra = Extra(extra.restarts + size, extra.points + points, extra.seconds + seconds)
    return extra
