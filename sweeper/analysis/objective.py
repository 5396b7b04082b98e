"""A server config's score: its objective value over restarts, and whether it may win at all.

Pure: point rows in, a `Score` out. The one definition the search (which config next) and
`sweeper best` (which config won) share, so they can never disagree on what "best" means.
Exactness is the hard constraint: a config with a determinism violation at any of its points is
`infeasible`, whatever its speed, at every load (it is the same server); it keeps its value so a
report can show how fast the wrong answer was. Only a clean verdict proves a point
(`proof.verdicts.standing`): a config none of whose outputs at some point was compared with
anything is `unproven`, and one whose recorded verdict at some point is missing or no verdict's
name is `damaged` (the point and the value named); neither is ever feasible, both keep their
value. Rows are read as `calibration.calibrated_points` gives them (near-ties above the AR-vs-AR
control are violations). A config whose numbers describe the client (`client_bound`) or that
failed has no value; one with no speedup because no AR baseline was measured to divide by is
`unproven` too (unmeasured, not failed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sweeper.config import RequestConfig
from sweeper.proof.verdicts import standing, verdict_damage
from sweeper.results.rows import is_missing
from sweeper.spec.search import ConstraintsSpec, ObjectiveSpec

State = Literal["ok", "infeasible", "unproven", "damaged", "failed"]
#: Ratios of two measurements: not trusted when either was taken on a busy host, nor when the
#: throughput one reads above the point's tau (`withheld_speedup`).
SPEEDUPS = ("speedup", "e2e_speedup", "itl_speedup")
#: Why a point has no speedup, though it ran: nothing to divide by (its config is unproven).
NO_BASELINE = "no AR baseline measured to compare with"
#: Two-sided 95% Student t quantiles by degrees of freedom (1..30).
_T95 = (
    (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
    + (2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)
    + (2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
)
_Z95 = 1.959964


def t95(df: float) -> float:
    """The two-sided 95% Student t quantile at `df` degrees of freedom (at least 1), rounded
    down to a whole df (a wider interval, never a narrower one); past 30, the normal's with
    its first Cornish-Fisher correction (within 0.1%)."""
    whole = max(1, int(df))
    if whole <= len(_T95):
        return _T95[whole - 1]
    return _Z95 + (_Z95**3 + _Z95) / (4 * whole)


def request_config_id(row: Mapping[str, Any]) -> str:
    """The request config id (`t0-c8`, `t0-r2`) of a point row: as recorded, or for a run
    written before records carried it, as its request config columns name it."""
    recorded = row.get("request_config_id")
    return str(recorded) if not is_missing(recorded) else RequestConfig.from_columns(row).id


def withheld_speedup(row: Mapping[str, Any]) -> str:
    """Why a point row's speedups are no result ("" when they are one): an impossible one, above
    its tau (`impossible.mark_impossible` marks it, with its likely cause), or one measured on a
    busy host, either side of the ratio. The report's marks and `score` read this one rule."""
    if row.get("speedup_impossible") is True:
        why = row.get("speedup_impossible_reason")
        return "an impossible speedup (above tau)" + (f": {why}" if isinstance(why, str) else "")
    if row.get("host_busy") is True or row.get("baseline_busy") is True:
        return "a speedup measured on a busy host (it or its baseline)"
    return ""


def withheld_kind(reason: str) -> str:
    """A `withheld_speedup` reason in a word, for a mark: `impossible`, `busy` or ""."""
    return "impossible" if reason.startswith("an impossible") else ("busy" if reason else "")


@dataclass(frozen=True)
class Interval:
    """A mean over restarts with its 95% confidence interval (None bounds with one restart)."""

    mean: float
    low: float | None
    high: float | None
    n: int
    #: Coefficient of variation (stdev / mean) over restarts; None with one restart.
    cv: float | None

    @classmethod
    def of(cls, samples: Sequence[float]) -> Interval:
        mean = statistics.fmean(samples)
        if len(samples) < 2:
            return cls(mean, None, None, len(samples), None)
        sd = statistics.stdev(samples)
        half = t95(len(samples) - 1) * sd / math.sqrt(len(samples))
        return cls(mean, mean - half, mean + half, len(samples), sd / mean if mean else None)

    def overlaps(self, other: Interval) -> bool:
        """Whether the two are inside each other's noise (False when either has no interval)."""
        if None in (self.low, self.high, other.low, other.high):
            return False
        assert self.low is not None and self.high is not None
        assert other.low is not None and other.high is not None
        return self.low <= other.high and other.low <= self.high


@dataclass(frozen=True)
class Score:
    """One server config against the objective."""

    state: State
    #: Why not ok ("" when ok).
    reason: str = ""
    #: Over restarts (each restart: the mean over the objective's request configs); kept for an
    #: infeasible config too. None when nothing could be scored.
    interval: Interval | None = None
    #: Per-restart values, restart order.
    samples: tuple[float, ...] = ()
    #: The restarts fall into separate regimes (see `separate_regimes`).
    regimes: bool = False
    #: Some of its scored points were measured on a busy host (`host_busy`).
    busy: bool = False

    @property
    def value(self) -> float | None:
        return None if self.interval is None else self.interval.mean


def score(
    rows: Iterable[Mapping[str, Any]],
    objective: ObjectiveSpec,
    constraints: ConstraintsSpec | None = None,
    at: Sequence[str] | None = None,
) -> Score:
    """Score one server config from all its point rows (every restart, every request config);
    `at` overrides the objective's request configs."""
    rows = list(rows)
    wanted = list(at if at is not None else objective.at)
    bad = sorted(
        {str(r["determinism"]) for r in rows if standing(r.get("determinism")) == "violation"}
    )
    selected = [r for r in rows if not wanted or request_config_id(r) in wanted]
    if not selected:
        return Score("failed", "not measured at " + ", ".join(wanted))
    by_restart: dict[int, list[float]] = {}
    problem = unmeasured = ""
    for row in selected:
        value: Any = row.get(objective.column)
        if row.get("status") != "ok":
            problem = problem or f"failed: {row.get('reason') or 'no reason recorded'}"
        elif row.get("client_bound") is True:
            problem = problem or "client-bound: its numbers describe the load client"
        elif is_missing(value) and objective.column in SPEEDUPS:
            # Nothing to divide by (`baseline: false`, or its AR point failed): no failure.
            unmeasured = f"no {objective.column} measured: {NO_BASELINE}"
        elif is_missing(value):
            problem = problem or f"no {objective.column}"
        else:
            restart = row.get("restart")
            index = 0 if restart is None or is_missing(restart) else int(restart)
            by_restart.setdefault(index, []).append(float(value))
    samples = tuple(statistics.fmean(v) for _, v in sorted(by_restart.items()))
    interval = Interval.of(samples) if samples and not problem and not unmeasured else None
    regimes = separate_regimes(samples)
    busy = any(r.get("host_busy") is True for r in selected)
    # An impossible one first: its reason names the busy baseline too, where that is the cause.
    withheld = [w for r in selected if (w := withheld_speedup(r))]
    withheld.sort(key=lambda w: not w.startswith("an impossible"))
    if not problem and not unmeasured and objective.column in SPEEDUPS and withheld:
        problem = f"withheld: {withheld[0]}"
    # `drift.mark_drift`. With 2+ restarts each divides by its own round's baseline, so the
    # baseline's movement is inside the interval (and `best` names no winner inside it); one
    # ratio against a baseline that moved has no such guard.
    drifted = any(r.get("baseline_drifted") is True for r in selected)
    if (
        not problem
        and not unmeasured
        and objective.column in SPEEDUPS
        and drifted
        and len(samples) < 2
    ):
        problem = "withheld: a speedup against an AR baseline that drifted (`baseline_drift`)"
    if bad:
        reason = "determinism " + ", ".join(bad)
        return Score("infeasible", reason, interval, samples, regimes, busy)
    if problem:
        return Score("failed", problem, None, samples, busy=busy)
    # The config is unproven anywhere it is (one server); say where first at the asked loads.
    damaged = [r for r in [*selected, *rows] if _needs_proof(r, "damaged")]
    if damaged:
        first = damaged[0]
        reason = f"{first.get('point_id')}: {verdict_damage(first.get('determinism'))}"
        return Score("damaged", reason, interval, samples, regimes, busy)
    unproven = [r for r in [*selected, *rows] if _needs_proof(r, "unjudged")]
    if unproven:
        first = unproven[0]
        why = first.get("unproven_reason")
        why = "nothing was compared with anything" if is_missing(why) or not why else str(why)
        reason = f"unproven at {request_config_id(first)}: {why}"
        return Score("unproven", reason, interval, samples, regimes, busy)
    if constraints is not None and constraints.slo:
        missed = [request_config_id(r) for r in selected if r.get("meets_slo") is not True]
        if missed:
            reason = "misses the SLO at " + ", ".join(sorted(set(missed)))
            return Score("infeasible", reason, interval, samples, regimes, busy)
    if unmeasured:
        return Score("unproven", unmeasured, None, samples, busy=busy)
    return Score("ok", "", interval, samples, regimes, busy)


def _needs_proof(row: Mapping[str, Any], found: str) -> bool:
    """A speculative point measured whose recorded verdict stands as `found` (`unjudged`:
    never compared with anything, older runs called it `n/a`; `damaged`: no verdict at all)."""
    return (
        str(row.get("mode")) != "ar"
        and row.get("status") == "ok"
        and standing(row.get("determinism")) == found
    )


def separate_regimes(
    samples: Sequence[float], ratio: float = 3.0, share: float = 0.1, lone_share: float = 0.25
) -> bool:
    """Whether restarts split into two clusters: sorted, some gap is at least `ratio` times the
    widest cluster's own range and `share` of the mean (3+ restarts; two cannot tell noise from
    regimes). A cluster of one restart is an outlier unless its gap is `lone_share` of the mean:
    on a quiet 2-core CPU three restarts of one config spread 12-18% with one of them apart
    (CV 5-11%), which is noise, not a second regime."""
    if len(samples) < 3:
        return False
    ordered = sorted(samples)
    mean = statistics.fmean(ordered)
    for i in range(1, len(ordered)):
        gap = ordered[i] - ordered[i - 1]
        within = max(ordered[i - 1] - ordered[0], ordered[-1] - ordered[i])
        lone = i == 1 or i == len(ordered) - 1
        needed = (lone_share if lone else share) * abs(mean)
        if gap >= ratio * max(within, 0.01 * abs(mean)) and gap >= needed:
            return True
    return False


def better(a: float, b: float, goal: str) -> bool:
    """Whether `a` beats `b` under the goal."""
    return a > b if goal == "maximize" else a < b
