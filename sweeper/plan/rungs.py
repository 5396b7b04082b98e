"""Successive halving's rungs as arithmetic, so the plan can promise an upper bound.

A rung of `size` scored configs keeps the best ceil(size / eta) for the next, each on a fresh
restart measured eta times longer, until one is left (`sweeper.search.strategies.Halving` asks
`next_rung` at every promotion). Every config of every rung feasible is the most a halving
search can restart: the plan counts those extra restarts, their points and their longer
measurements (`sweeper.plan.model.halving_extra`), so `plan`, the progress total and the
estimate are bounds the run never passes.
"""

from __future__ import annotations

import math


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
