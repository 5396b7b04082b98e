"""Open-loop arrival schedules: when each request of a point is due, drawn once from a seed.

Semantics follow vLLM's `bench serve` (`--request-rate`, `--burstiness`): the gaps between
arrivals are gamma-distributed with shape = burstiness and mean 1/rate (scale 1/(rate *
burstiness)); burstiness 1 is the exponential, i.e. a Poisson process; below 1 is burstier,
above 1 more regular. `constant` is a fixed gap of 1/rate. `rate = inf` sends every request at
once (offset 0). Two deliberate differences from vLLM: the gaps are not rescaled to make the
last arrival land on n/rate (that rescaling ties the gaps together; here they stay independent,
so the recorded send times can be tested against the asked distribution), and `duration_s`
(arrivals inside a window) is offered beside a request count.

Offsets are seconds from the point's start t0: offset_i = gap_0 + ... + gap_i, so the first
request also waits one gap and, in a window, the number of Poisson arrivals is itself Poisson.
The schedule depends only on (profile, seed): the pool draws it once in the parent and shards
it over its worker processes, so a point repeats exactly whatever the number of processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Arrival = Literal["poisson", "constant", "gamma"]
ARRIVALS: tuple[Arrival, ...] = ("poisson", "constant", "gamma")
#: Gaps are drawn in blocks of at least this many while filling a duration window.
_MIN_BLOCK = 64


@dataclass(frozen=True)
class ArrivalProfile:
    """An open-loop load: `rate` req/s (or inf), the gap distribution, and how long it lasts.

    Exactly one of `duration_s` (every arrival before that offset) and `requests` (that many
    arrivals) is set. `burstiness` is the gamma shape and only means something for `gamma`
    (poisson is gamma with shape 1; constant has no spread).
    """

    rate: float
    arrival: Arrival = "poisson"
    burstiness: float = 1.0
    duration_s: float | None = None
    requests: int | None = None

    def __post_init__(self) -> None:
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, not {self.arrival!r}")
        if not self.rate > 0:  # also refuses NaN
            raise ValueError(f"rate must be > 0 requests/s (or inf), not {self.rate!r}")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise ValueError(f"burstiness must be a finite number > 0, not {self.burstiness!r}")
        if self.arrival != "gamma" and self.burstiness != 1.0:
            raise ValueError(
                f"burstiness applies to arrival: gamma only (poisson is gamma with burstiness 1, "
                f"constant has none); got burstiness {self.burstiness} with {self.arrival}"
            )
        if (self.duration_s is None) == (self.requests is None):
            raise ValueError("give exactly one of duration_s and requests")
        if self.duration_s is not None:
            if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
                raise ValueError(f"duration_s must be a finite number > 0, not {self.duration_s}")
            if math.isinf(self.rate):
                raise ValueError(
                    "rate inf with duration_s would send an unbounded number of requests at "
                    "once; give a request count instead"
                )
        if self.requests is not None and self.requests < 1:
            raise ValueError(f"requests must be >= 1, not {self.requests}")

    @property
    def mean_gap_s(self) -> float:
        return 0.0 if math.isinf(self.rate) else 1.0 / self.rate


def draw_gaps(profile: ArrivalProfile, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` independent gaps (seconds) of the profile's distribution, from `rng`."""
    if math.isinf(profile.rate):
        return np.zeros(n)
    if profile.arrival == "constant":
        return np.full(n, 1.0 / profile.rate)
    # poisson is gamma with shape 1 (numpy draws an exponential then), so burstiness 1 gives
    # the very same schedule under either name.
    shape = profile.burstiness
    return rng.gamma(shape=shape, scale=1.0 / (profile.rate * shape), size=n)


def schedule(profile: ArrivalProfile, seed: int) -> np.ndarray:
    """The point's arrival offsets (seconds from t0, non-decreasing), drawn from `seed`."""
    rng = np.random.default_rng(seed)
    if profile.requests is not None:
        return np.cumsum(draw_gaps(profile, profile.requests, rng))
    assert profile.duration_s is not None
    block = max(_MIN_BLOCK, math.ceil(1.2 * profile.rate * profile.duration_s))
    offsets = np.cumsum(draw_gaps(profile, block, rng))
    while offsets[-1] < profile.duration_s:
        more = np.cumsum(draw_gaps(profile, block, rng)) + offsets[-1]
        offsets = np.concatenate([offsets, more])
    return offsets[offsets < profile.duration_s]


def exponential_ks(gaps: np.ndarray, rate: float) -> tuple[float, float]:
    """Kolmogorov-Smirnov statistic D of `gaps` against Exp(rate), and its asymptotic p-value.

    The p-value is the Kolmogorov distribution's tail, 2 * sum (-1)^(k-1) exp(-2 k^2 t^2) with
    t = D * (sqrt(n) + 0.12 + 0.11 / sqrt(n)) (Stephens' small-sample correction), good to a few
    percent for n >= 35, which is plenty for accepting or rejecting a schedule.
    """
    x = np.sort(np.asarray(gaps, dtype=float))
    n = x.size
    if n == 0:
        raise ValueError("no gaps to test")
    cdf = 1.0 - np.exp(-rate * x)
    i = np.arange(1, n + 1)
    d = float(max(np.max(i / n - cdf), np.max(cdf - (i - 1) / n)))
    t = d * (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n))
    if t < 0.2:
        return d, 1.0
    k = np.arange(1, 101)
    p = float(2.0 * np.sum((-1.0) ** (k - 1) * np.exp(-2.0 * k**2 * t**2)))
    return d, min(max(p, 0.0), 1.0)
