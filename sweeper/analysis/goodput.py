"""Goodput against latency SLOs, and the knee: the highest offered rate at which a config still
meets them (pure functions on request records).

Definitions, following vLLM's `bench serve --goodput` and GuideLLM where they agree:
- Each target is judged per request, on that request's own figures: TTFT (`ttft`), E2E
  (`e2e`), and ITL = the request's mean time per output token after the first,
  (e2e - ttft) / (output_tokens - 1) (vLLM's TPOT, GuideLLM's and AIPerf's per-request
  inter-token latency; 0 with a single token, as in vLLM). Not the point's pooled chunk-gap
  ITL of sweeper.analysis.metrics: a speculative step delivers several tokens in one chunk, so chunk
  gaps would charge it for batching its output.
- A request is good when it finished without error and meets every target that is set
  (value <= target). Errors, requests cancelled at the end of the duration and requests never
  sent are misses, so the share is over every request the point offered.
- goodput_share = good / offered; goodput_rps = good / the point's wall time (vLLM's
  request_goodput).
- The targets are the spec's `slo:` section (`sweeper.spec.SloSpec`).
- The point meets the SLO when goodput_share >= `attainment` (0.99 by default). So "TTFT p99
  <= a, ITL p99 <= b, E2E <= c" reads as: 99% of requests meet all three at once (GuideLLM's
  "meet the SLOs for 99% of users"). For a single target this is the point's p99 being within
  it; with several it is stricter than each p99 on its own, because the good 99% must be the
  same requests.
- The knee of a config is the highest offered rate r such that every tested rate up to r meets
  the SLO (a miss at a lower rate is not excused by a pass above it). A client-bound point
  stops the scan: it says nothing about the server. Below both knees an open loop's throughput
  is the offered rate for either config, so the comparison with the AR baseline there is on
  latency: the ratio of median E2E and of median per-request ITL at each common rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sweeper.results.rows import is_failed, is_missing, request_rows_of, rows_of
from sweeper.spec import SloSpec

#: The SLO's targets and attainment are the spec's `slo:` section.
Slo = SloSpec


@dataclass(frozen=True)
class PointGoodput:
    """One point against one SLO."""

    offered: int
    good: int
    missed_error: int
    missed_unfinished: int
    goodput_share: float | None
    goodput_rps: float | None
    meets_slo: bool


@dataclass(frozen=True)
class RatePoint:
    """One open-loop point of a config: its offered rate, goodput and median latencies."""

    rate: float
    goodput: PointGoodput
    e2e_p50: float | None
    itl_p50: float | None
    client_bound: bool = False


@dataclass(frozen=True)
class Knee:
    """The highest rate meeting the SLO from the lowest tested rate up (None: not even that)."""

    rate: float | None
    #: True when every tested rate met the SLO: the real knee is at or above `rate`.
    censored: bool
    #: Why the scan stopped ("misses the SLO at 4 req/s (91% good)", "client-bound at ...").
    stopped_by: str | None


@dataclass(frozen=True)
class LatencySpeedup:
    """Baseline over config latency at one rate (above 1: the config is faster)."""

    rate: float
    e2e: float | None
    itl: float | None
    #: The rate is at or below both knees, where the comparison is on equal throughput.
    below_knees: bool


@dataclass(frozen=True)
class KneeComparison:
    knee: Knee
    baseline: Knee
    #: knee / baseline knee, when both are finite and neither is censored.
    ratio: float | None
    latency: tuple[LatencySpeedup, ...]


def request_itl(row: Mapping[str, object]) -> float | None:
    """The request's mean time per output token after the first (see the module doc)."""
    ttft, e2e, n = row.get("ttft"), row.get("e2e"), row.get("output_tokens")
    if is_missing(ttft) or is_missing(e2e) or is_missing(n):
        return None
    tokens = int(n)  # type: ignore[call-overload]
    if tokens <= 1:
        return 0.0
    return (float(e2e) - float(ttft)) / (tokens - 1)  # type: ignore[arg-type]


def _finished(row: Mapping[str, object]) -> bool:
    finished = row.get("finished", True)  # records from before the pool have no flag
    return not is_missing(finished) and bool(finished)


def request_is_good(row: Mapping[str, object], slo: Slo) -> bool:
    """Finished, no error, and every set target met (value <= target)."""
    if is_failed(row) or not _finished(row):
        return False
    checks = (
        (slo.ttft_s, row.get("ttft")),
        (slo.itl_s, request_itl(row)),
        (slo.e2e_s, row.get("e2e")),
    )
    for target, value in checks:
        if target is None:
            continue
        if value is None or is_missing(value) or float(value) > target:  # type: ignore[arg-type]
            return False
    return True


def point_goodput(records: object, slo: Slo, wall_s: float) -> PointGoodput:
    """Goodput of one point's records (every offered request, see the module doc)."""
    rows = rows_of(records)
    good = sum(request_is_good(r, slo) for r in rows)
    unfinished = sum(not _finished(r) for r in rows)
    errors = sum(is_failed(r) and _finished(r) for r in rows)
    share = good / len(rows) if rows else None
    return PointGoodput(
        offered=len(rows),
        good=good,
        missed_error=errors,
        missed_unfinished=unfinished,
        goodput_share=share,
        goodput_rps=good / wall_s if wall_s > 0 and rows else None,
        meets_slo=share is not None and share >= slo.attainment,
    )


def _median(values: Iterable[object]) -> float | None:
    data = [float(v) for v in values if isinstance(v, (int, float)) and not is_missing(v)]
    return float(np.median(data)) if data else None


def rate_point(
    rate: float, records: object, slo: Slo, wall_s: float, *, client_bound: bool = False
) -> RatePoint:
    """A config's point at one offered rate: goodput, median E2E and median per-request ITL."""
    rows = rows_of(records)
    ok = [r for r in rows if not is_failed(r) and _finished(r)]
    return RatePoint(
        rate=rate,
        goodput=point_goodput(rows, slo, wall_s),
        e2e_p50=_median(r.get("e2e") for r in ok),
        itl_p50=_median(request_itl(r) for r in ok),
        client_bound=client_bound,
    )


def knee(points: Sequence[RatePoint]) -> Knee:
    """The highest offered rate meeting the SLO, scanning up from the lowest (module doc)."""
    last: float | None = None
    for p in sorted(points, key=lambda q: q.rate):
        if p.client_bound:
            return Knee(last, False, f"client-bound at {_rate(p.rate)}")
        if not p.goodput.meets_slo:
            share = p.goodput.goodput_share
            got = "no requests" if share is None else f"{share:.0%} good"
            return Knee(last, False, f"misses the SLO at {_rate(p.rate)} ({got})")
        last = p.rate
    return Knee(last, last is not None, None)


def compare_knees(points: Sequence[RatePoint], baseline: Sequence[RatePoint]) -> KneeComparison:
    """A config's knee against the AR baseline's, and its latency speedup at each common rate."""
    mine, theirs = knee(points), knee(baseline)
    ratio = None
    finite = [k.rate for k in (mine, theirs) if k.rate is not None and math.isfinite(k.rate)]
    if len(finite) == 2 and not mine.censored and not theirs.censored and theirs.rate:
        ratio = mine.rate / theirs.rate  # type: ignore[operator]
    limit = min((k.rate if k.rate is not None else -math.inf) for k in (mine, theirs))
    base_by_rate = {p.rate: p for p in baseline if not p.client_bound}
    latency = tuple(
        LatencySpeedup(
            rate=p.rate,
            e2e=_ratio(base_by_rate[p.rate].e2e_p50, p.e2e_p50),
            itl=_ratio(base_by_rate[p.rate].itl_p50, p.itl_p50),
            below_knees=p.rate <= limit,
        )
        for p in sorted(points, key=lambda q: q.rate)
        if p.rate in base_by_rate and not p.client_bound
    )
    return KneeComparison(knee=mine, baseline=theirs, ratio=ratio, latency=latency)


def _ratio(baseline: float | None, value: float | None) -> float | None:
    if baseline is None or value is None or value <= 0:
        return None
    return baseline / value


def _rate(rate: float) -> str:
    return "rate inf" if math.isinf(rate) else f"{rate:g} req/s"


def goodput_columns(records: object, slo: Slo | None, wall_s: float) -> dict[str, object]:
    """A point's goodput columns against the spec's SLO (all None without one), and its
    per-request ITL percentiles (what the SLO's ITL target judges): one row per request."""
    rows = request_rows_of(rows_of(records))
    ok = [r for r in rows if not is_failed(r) and _finished(r)]
    itls = np.asarray([v for v in (request_itl(r) for r in ok) if v is not None], dtype=float)
    columns: dict[str, object] = {
        "request_itl_p50": float(np.percentile(itls, 50)) if itls.size else None,
        "request_itl_p99": float(np.percentile(itls, 99)) if itls.size else None,
        "goodput_share": None,
        "goodput_rps": None,
        "meets_slo": None,
    }
    if slo is not None and rows:
        g = point_goodput(rows, slo, wall_s)
        columns.update(
            goodput_share=g.goodput_share, goodput_rps=g.goodput_rps, meets_slo=g.meets_slo
        )
    return columns


def latency_speedups(
    point: Mapping[str, object], baseline: Mapping[str, object] | None
) -> dict[str, float | None]:
    """Baseline over point median E2E and median request ITL (the point columns)."""
    base = baseline or {}
    return {
        "e2e_speedup": _ratio(_num(base.get("e2e_p50")), _num(point.get("e2e_p50"))),
        "itl_speedup": _ratio(
            _num(base.get("request_itl_p50")), _num(point.get("request_itl_p50"))
        ),
    }


def rate_point_of(row: Mapping[str, object]) -> RatePoint:
    """An open-loop point row (its recorded goodput and latency columns) as a RatePoint."""
    offered = int(_num(row.get("n_requests")) or 0) + int(_num(row.get("n_errors")) or 0)
    share, rps = _num(row.get("goodput_share")), _num(row.get("goodput_rps"))
    meets = row.get("meets_slo")
    goodput = PointGoodput(
        offered=offered,
        good=round((share or 0.0) * offered),
        missed_error=int(_num(row.get("n_errors")) or 0) - int(_num(row.get("n_unfinished")) or 0),
        missed_unfinished=int(_num(row.get("n_unfinished")) or 0),
        goodput_share=share,
        goodput_rps=rps,
        meets_slo=not is_missing(meets) and bool(meets),
    )
    bound = row.get("client_bound")
    return RatePoint(
        rate=float(row["rate"]),  # type: ignore[arg-type]
        goodput=goodput,
        e2e_p50=_num(row.get("e2e_p50")),
        itl_p50=_num(row.get("request_itl_p50")),
        client_bound=not is_missing(bound) and bool(bound),
    )


def _num(value: object) -> float | None:
    if value is None or is_missing(value) or isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
