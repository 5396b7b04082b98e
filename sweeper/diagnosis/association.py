"""Fisher's exact test on a 2x2 table: is a condition associated with violations, beyond chance?

The diagnosis asks this of every candidate condition (a factor's value) over counts of requests:
inside / outside the condition x broken / clean. Exact, from the hypergeometric distribution in
log space (lgamma), so it is deterministic and needs no statistics package. Two-sided p sums every
table at most as likely as the observed one (with a relative tolerance for float ties), as R and
SciPy do; `greater` asks whether violations are enriched inside.
"""

from __future__ import annotations

import math
from typing import Literal

#: Two tables' probabilities this close count as equally likely (float noise in lgamma).
_TIE = 1e-7


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(
    broken_in: int,
    clean_in: int,
    broken_out: int,
    clean_out: int,
    alternative: Literal["two-sided", "greater"] = "two-sided",
) -> float:
    """p-value of the 2x2 table [[broken_in, clean_in], [broken_out, clean_out]]."""
    counts = (broken_in, clean_in, broken_out, clean_out)
    if min(counts) < 0:
        raise ValueError(f"counts must be >= 0, got {counts}")
    total = sum(counts)
    broken = broken_in + broken_out
    inside = broken_in + clean_in
    low, high = max(0, inside - (total - broken)), min(broken, inside)
    if low == high:
        return 1.0  # a margin is empty or full: only one table is possible
    denominator = _log_comb(total, inside)

    def log_p(x: int) -> float:
        return _log_comb(broken, x) + _log_comb(total - broken, inside - x) - denominator

    if alternative == "greater":
        return min(1.0, sum(math.exp(log_p(x)) for x in range(broken_in, high + 1)))
    observed = log_p(broken_in)
    bound = observed + math.log1p(_TIE)
    return min(1.0, sum(math.exp(lp) for x in range(low, high + 1) if (lp := log_p(x)) <= bound))
