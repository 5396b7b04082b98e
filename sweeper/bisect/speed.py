"""Is a commit slower than the good end by more than the threshold? Pure: samples in, a verdict out.

Throughput is a positive quantity whose restart noise is multiplicative (a busy host halves it,
never subtracts a constant), so every interval here is on the log scale: an end's interval is
the geometric mean over its restarts times or divided by a 95% Student t factor, which is never
below zero however noisy the restarts. Two ends are compared by the ratio of their geometric
means, commit / good, with Welch's 95% interval on the difference of the log means: the noise of
both ends, each with its own spread and count, is in it.

- an end whose own interval is wider than the threshold (its high / low above
  `1 / (1 - threshold)`: noisier than the gap it must resolve) decides nothing, whatever the
  ratio says: it is measured again. Restart noise that wide is not a sample of one speed (a
  host whose load comes and goes), so a ratio test on it would blame commits for the load;
- else bad when the whole ratio interval lies below the line `1 - threshold`, good when it
  lies wholly at or above the line, and undecided otherwise (both ends measured again: more
  restarts of both narrow the ratio).
An end with fewer than two restarts has no interval: it is measured again.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sweeper.analysis.objective import t95
from sweeper.bisect.search import Outcome

#: A slowdown threshold lies above 0 and below this (100%): nothing is more than 100% slower.
THRESHOLD_BELOW = 1.0

#: Which end of a comparison: the commit measured, or the good end it is held against.
End = Literal["commit", "good"]


@dataclass(frozen=True)
class LogInterval:
    """A positive quantity over restarts: geometric mean, 95% interval on the log scale (None
    bounds with one restart), count, and the log mean and variance the ratio needs."""

    mean: float
    low: float | None
    high: float | None
    n: int
    log_mean: float
    log_var: float | None

    @classmethod
    def of(cls, samples: Sequence[float]) -> LogInterval:
        """Over `samples`, every one positive (a ValueError otherwise)."""
        if not samples or min(samples) <= 0:
            raise ValueError(f"a log-scale interval needs positive samples, not {list(samples)}")
        logs = [math.log(s) for s in samples]
        centre = statistics.fmean(logs)
        if len(logs) < 2:
            return cls(math.exp(centre), None, None, 1, centre, None)
        var = statistics.variance(logs)
        half = t95(len(logs) - 1) * math.sqrt(var / len(logs))
        low, high = math.exp(centre - half), math.exp(centre + half)
        return cls(math.exp(centre), low, high, len(logs), centre, var)

    def too_wide(self, threshold: float) -> bool:
        """Whether it cannot resolve a `threshold` slowdown: no interval, or high / low above
        1 / (1 - threshold)."""
        if self.low is None or self.high is None:
            return True
        return self.high / self.low > 1 / (1 - threshold)

    def said(self, unit: str = "tok/s") -> str:
        if self.low is None or self.high is None:
            return f"{self.mean:.1f} {unit} (n={self.n})"
        return f"{self.mean:.1f} {unit} [{self.low:.1f}, {self.high:.1f}] (n={self.n})"


@dataclass(frozen=True)
class Ratio:
    """commit / good, the ratio of geometric means, with its 95% Welch interval."""

    value: float
    low: float
    high: float


def ratio(commit: LogInterval, good: LogInterval) -> Ratio | None:
    """The ratio's interval; None when either end has no interval (one restart)."""
    if commit.log_var is None or good.log_var is None:
        return None
    a, b = commit.log_var / commit.n, good.log_var / good.n
    diff = commit.log_mean - good.log_mean
    if a + b == 0:  # both ends measured the same every restart: no noise to allow for
        return Ratio(math.exp(diff), math.exp(diff), math.exp(diff))
    # Welch-Satterthwaite degrees of freedom.
    df = (a + b) ** 2 / (a**2 / (commit.n - 1) + b**2 / (good.n - 1))
    half = t95(df) * math.sqrt(a + b)
    return Ratio(math.exp(diff), math.exp(diff - half), math.exp(diff + half))


@dataclass(frozen=True)
class SpeedVerdict:
    """One point's comparison: the outcome (None: undecided), why in words, and which ends to
    measure again while undecided."""

    outcome: Outcome | None
    reason: str
    again: frozenset[End] = frozenset()


def compare(commit: LogInterval, good: LogInterval, threshold: float) -> SpeedVerdict:
    """The commit against the good end at `threshold` (a fraction in (0, 1)); the reason names
    what decided, or what stands in the way."""
    line = 1 - threshold
    ends: tuple[tuple[End, LogInterval], ...] = (("commit", commit), ("good", good))
    shown = f"{commit.said()} vs good {good.said()}"
    found = ratio(commit, good)
    if found is None:
        short = frozenset(e for e, i in ends if i.n < 2)
        names = " and ".join(_end_name(e) for e in sorted(short))
        return SpeedVerdict(None, f"{shown}: {names} has one restart, no interval", short)
    change = f"ratio {found.value:.3f} [{found.low:.3f}, {found.high:.3f}], {found.value - 1:+.1%}"
    said = f"{shown}: {change}"
    wide = frozenset(e for e, i in ends if i.too_wide(threshold))
    if wide:  # an end noisier than the gap to resolve decides nothing, whatever the ratio says
        blockers = "; ".join(
            f"{_end_name(e)}'s interval spans x{_spread(i):.2f}, wider than the "
            f"{percent(threshold)} threshold can resolve (x{1 / line:.2f})"
            for e, i in ends
            if e in wide
        )
        return SpeedVerdict(None, f"{said}: {blockers}", wide)
    if found.high < line:
        return SpeedVerdict("bad", f"{said}: wholly below the line {line:.3f}")
    if found.low >= line:
        return SpeedVerdict("good", f"{said}: wholly at or above the line {line:.3f}")
    return SpeedVerdict(
        None,
        f"{said}: the line {line:.3f} lies inside it, both ends narrow: the commit is about "
        "the threshold's slowdown",
        frozenset(e for e, _ in ends),
    )


def percent(fraction: float) -> str:
    """0.005 -> `0.5%`, 0.1 -> `10%`: a threshold as given, never rounded away."""
    return f"{fraction * 100:.4g}%"


def _end_name(end: End) -> str:
    return "the good end" if end == "good" else "the commit"


def _spread(interval: LogInterval) -> float:
    assert interval.low is not None and interval.high is not None
    return interval.high / interval.low
