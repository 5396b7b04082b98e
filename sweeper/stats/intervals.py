"""Confidence bounds on a rate: Wilson's score interval, so 0 of 8 is not read as 0 of 8000."""

from __future__ import annotations

import math
from statistics import NormalDist


def wilson_upper(successes: int, trials: int, confidence: float = 0.95) -> float:
    """The upper end of the two-sided Wilson score interval for `successes` of `trials` at
    `confidence` (1.0 with no trials: nothing is known)."""
    if not trials:
        return 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n, p = trials, successes / trials
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))
