"""Did the client keep up? Per-point self-checks of the load generator, and what it achieved.

Every worker process measures, over the point's span (t0 to its last record), its CPU time
(user + sys, `time.process_time`) over that wall span and the lateness of an event-loop ticker
that asks to wake every `sweeper.measure.load_process.TICK_S`. Every open-loop send records how
late it left (`late_s`): after its scheduled time or, when it had to wait for a free
`max_concurrency` slot, after that slot freed (the wait itself is the load shape's, not the
client's). A point breaching any bound
below (lag and lateness taken at the `CHECK_PERCENTILE` of their samples) is `client_bound`:
its numbers describe the client, not the server, and the reasons say which bound, on which
worker, with the measured value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sweeper.measure.load_process import WorkerStats

#: Above 90% of one core a process has no headroom: callbacks queue behind each other and every
#: timestamp it takes includes that queueing. (A starved process can sit far below this, since
#: it is not given the CPU to use; the loop-lag bound catches that case.)
CPU_SHARE_MAX = 0.90
#: The lag and lateness bounds apply to this percentile of a point's samples, not the maximum:
#: a client that cannot keep up is late most of the time, while sporadic stalls (a neighbour's
#: burst, a GC pause) hit a few percent of samples and move the point's figures little. On this
#: 2-core machine at a load average of 5-6, an idle client's p99 lag reached 25-75 ms in one run
#: of three and its p90 stayed under 7 ms; a client held to 5% of a core has a p90 near 95 ms.
CHECK_PERCENTILE = 90
#: Loop lag is added to every timestamp the worker takes, so it is error on TTFT and ITL
#: directly; 20 ms is below a GPU server's typical ITL p99 (20-50 ms) and 3x the idle p90 above.
LOOP_LAG_MAX_S = 0.020
#: Actual minus scheduled send. Later than 25 ms and the client is reshaping the arrival process
#: it was asked for at the rates a GPU host takes (mean gaps of 25 ms and more), while the timer
#: granularity (1 ms) and an idle client's p90 on a busy machine (~5 ms) stay well inside it.
LATE_MAX_S = 0.025


@dataclass(frozen=True)
class WorkerCheck:
    """The per-worker summary kept with the point (lags in seconds)."""

    worker: int
    cpu_s: float
    wall_s: float
    cpu_share: float
    loop_lag_p90_s: float | None
    loop_lag_p99_s: float | None
    loop_lag_max_s: float | None
    n_sent: int


@dataclass(frozen=True)
class ClientCheck:
    """The point's verdict on its own client, with the values it was decided on."""

    client_bound: bool
    reasons: tuple[str, ...]
    workers: tuple[WorkerCheck, ...]
    late_p90_s: float | None
    late_p99_s: float | None
    late_max_s: float | None
    #: What the point achieved, to compare with what it asked for.
    achieved_rate: float | None
    mean_in_flight: float | None
    max_in_flight: int
    thresholds: dict[str, float] = field(
        default_factory=lambda: {
            "percentile": CHECK_PERCENTILE,
            "cpu_share_max": CPU_SHARE_MAX,
            "loop_lag_max_s": LOOP_LAG_MAX_S,
            "late_max_s": LATE_MAX_S,
        }
    )


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def check_client(stats: Sequence[WorkerStats], records: Sequence[Mapping[str, Any]]) -> ClientCheck:
    """Judge the point's client from its workers' stats and its records (see the module doc)."""
    p = CHECK_PERCENTILE
    reasons: list[str] = []
    workers: list[WorkerCheck] = []
    for s in sorted(stats, key=lambda w: w.worker):
        lags = np.asarray(s.lags_ns, dtype=float) / 1e9
        lag = _pct(lags, p)
        lag_max = float(lags.max()) if lags.size else None
        workers.append(
            WorkerCheck(
                s.worker, s.cpu_s, s.wall_s, s.cpu_share, lag, _pct(lags, 99), lag_max, s.n_sent
            )
        )
        if s.cpu_share > CPU_SHARE_MAX:
            reasons.append(
                f"worker {s.worker}: CPU {s.cpu_share:.0%} of one core > {CPU_SHARE_MAX:.0%}"
            )
        if lag is not None and lag > LOOP_LAG_MAX_S:
            reasons.append(
                f"worker {s.worker}: event-loop lag p{p} {lag * 1e3:.1f} ms > "
                f"{LOOP_LAG_MAX_S * 1e3:.0f} ms"
            )
    late = np.asarray([r["late_s"] for r in records if r.get("late_s") is not None], dtype=float)
    late_p = _pct(late, p)
    if late_p is not None and late_p > LATE_MAX_S:
        reasons.append(
            f"arrivals late: p{p} {late_p * 1e3:.1f} ms after schedule > "
            f"{LATE_MAX_S * 1e3:.0f} ms ({late.size} sends)"
        )
    rate, mean_in_flight, max_in_flight = achieved(records)
    return ClientCheck(
        client_bound=bool(reasons),
        reasons=tuple(reasons),
        workers=tuple(workers),
        late_p90_s=_pct(late, 90),
        late_p99_s=_pct(late, 99),
        late_max_s=float(late.max()) if late.size else None,
        achieved_rate=rate,
        mean_in_flight=mean_in_flight,
        max_in_flight=max_in_flight,
    )


def achieved(records: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None, int]:
    """(send rate, time-weighted mean in flight, max in flight) from the records' send/done times.

    The rate is (sends - 1) over the span from first to last send. The mean in flight is taken
    over the same span, so a closed loop's ramp-down after its last send does not dilute it.
    A request still in flight at the end counts until its `done_s` (when it was given up).
    """
    spans = sorted(
        (float(r["sent_s"]), float(r["done_s"]))
        for r in records
        if r.get("sent_s") is not None and r.get("done_s") is not None
    )
    if not spans:
        return None, None, 0
    first, last = spans[0][0], spans[-1][0]
    rate = (len(spans) - 1) / (last - first) if len(spans) > 1 and last > first else None
    events = sorted([(s, 1) for s, _ in spans] + [(d, -1) for _, d in spans])
    level = peak = 0
    area, prev = 0.0, first
    for t, step in events:  # ends sort before starts at equal times: half-open intervals
        lo, hi = max(prev, first), min(t, last)
        if hi > lo:
            area += level * (hi - lo)
        prev = t
        level += step
        peak = max(peak, level)
    mean = area / (last - first) if last > first else None
    return rate, mean, peak


def check_columns(check: ClientCheck | None, processes: int) -> dict[str, Any]:
    """The point columns of a self-check (`sweeper.results.records.PointRecord`): the verdict
    and its reasons, and the worst worker's CPU share and loop lag."""
    if check is None:
        return {}
    workers = check.workers

    def worst(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    return {
        "client_bound": check.client_bound,
        "client_bound_reason": "; ".join(check.reasons),
        "client_processes": processes,
        "client_cpu_share": worst([w.cpu_share for w in workers]),
        "loop_lag_p90": worst([w.loop_lag_p90_s for w in workers]),
        "loop_lag_p99": worst([w.loop_lag_p99_s for w in workers]),
        "late_p90": check.late_p90_s,
        "late_p99": check.late_p99_s,
        "achieved_rate": check.achieved_rate,
        "mean_in_flight": check.mean_in_flight,
        "max_in_flight": check.max_in_flight,
    }
