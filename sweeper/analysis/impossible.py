"""Impossible speedups: a closed-loop throughput speedup above the point's own tau.

At a fixed concurrency (a closed loop, request config `t0-c4`) a speculative server's verify round
costs at least one AR step of the same batch (the target's forward over the drafted trees, on top
of drafting) and emits tau tokens on average (`tau`: mean tokens per verify step), so its
throughput is at most tau times the AR server's: `speedup` (output tok/s over its AR baseline's)
<= tau. A speedup above tau is not a fast config but a slow denominator: the AR baseline ran
slower than the config's own steps would, measured at a busier moment than the config (another
process on the host, a throttled CPU). An open loop (`t0-r2`) is left alone: there the two
servers hold different numbers of requests in flight, so their steps are of different batches
and the bound does not hold as stated.

A point (host, server config, request config) is flagged when its speedup is beyond its interval
above tau: with 2+ restarts when the 95% interval's low bound (`objective.Interval`) is above the
mean tau, with one measurement when it exceeds tau by more than `IMPOSSIBLE_MARGIN`. Every row of
a flagged point is marked (`mark_impossible`) with the likely cause read from the rows: its AR
baseline measured on a busy host (`baseline_busy`), a baseline that drifted (`baseline_drifted`,
which `drift.mark_drift` adds: mark drift first), the point itself on a busy host, else a
baseline measured at a busier moment nothing recorded. `sweeper best` and the search withhold a
speedup objective over such rows (`objective.withheld_speedup`); the report marks them and never
stars or plots them as a result. Pure: rows in, rows or lines out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sweeper.analysis.drift import DRIFT_LIMIT, mark_drift
from sweeper.analysis.objective import Interval, request_config_id
from sweeper.config.labels import first_restart_label, point_label
from sweeper.results.records import ServerConfigColumns
from sweeper.results.rows import is_missing

#: How far above tau a lone speedup (one measurement, no interval) may read before it is flagged.
#: A single ratio carries both measurements' noise with nothing to size it; the allowance is the
#: movement a baseline may show between its own measurements before its speedups are distrusted
#: (`drift.DRIFT_LIMIT`, 10%): within it, a lone ratio above tau is noise a re-measure may undo.
IMPOSSIBLE_MARGIN = DRIFT_LIMIT
#: What `mark_impossible` adds to a row: derived here, never recorded, so no grid flag.
IMPOSSIBLE_COLUMNS = ("speedup_impossible", "speedup_impossible_reason")
#: The cause when the rows hold no evidence of one.
UNSEEN_CAUSE = (
    "the AR baseline ran slower than this config's own verify steps allow: measured at a busier "
    "moment than the config (re-measure with repeats.restarts)"
)
#: The unseen cause in a few words.
UNSEEN_BRIEF = "cause unrecorded: re-measure with repeats.restarts"
#: How many points a closing line names before "and N more".
_NAMED = 4


@dataclass(frozen=True)
class Impossible:
    """One point whose throughput speedup is above its tau, with what the rows say of why."""

    host: str
    #: The server config, spoken (`b4 k1 bs8 cg`), and its request config id (`t0-c1`).
    label: str
    at: str
    #: Its speedups over restarts (one sample: measured once) and its mean tau.
    speedup: Interval
    tau: float
    cause: str
    #: The cause in a few words (`busy baseline`), for a run's closing line.
    brief: str
    point_ids: tuple[str, ...]
    #: What its rows share (`_point_key`): how `mark_impossible` finds them.
    key: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def numbers(self) -> str:
        """`speedup 2.60x above tau 1.93`, with the interval when there are restarts."""
        s = self.speedup
        spread = (
            f" (95% CI {s.low:.2f}-{s.high:.2f} over {s.n} restarts)"
            if s.low is not None and s.high is not None
            else ""
        )
        return f"speedup {s.mean:.2f}x{spread} above tau {self.tau:.2f}"

    @property
    def reason(self) -> str:
        """What a marked row carries: the numbers, then the likely cause."""
        return f"{self.numbers}: {self.cause}"


def impossible_speedups(rows: Iterable[Mapping[str, Any]]) -> list[Impossible]:
    """The points whose closed-loop speedup is above their tau beyond its interval, in the
    order the rows first name them. Reads `baseline_drifted` from the rows (`mark_drift`)."""
    points: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        if _measured(row):
            points.setdefault(_point_key(row), []).append(row)
    found = []
    for key, measured in points.items():
        speedups = [float(r["speedup"]) for r in measured]
        tau = statistics.fmean(float(r["tau"]) for r in measured)
        interval = Interval.of(speedups)
        if interval.low is not None:
            beyond = interval.low > tau
        else:
            beyond = interval.mean > tau * (1.0 + IMPOSSIBLE_MARGIN)
        if beyond:
            first = measured[0]
            cause, brief = _cause(measured)
            found.append(
                Impossible(
                    host=str(first.get("host")),
                    label=point_label(first),
                    at=request_config_id(first),
                    speedup=interval,
                    tau=tau,
                    cause=cause,
                    brief=brief,
                    point_ids=tuple(str(r.get("point_id")) for r in measured),
                    key=key,
                )
            )
    return found


def mark_impossible(
    rows: Iterable[Mapping[str, Any]], found: list[Impossible] | None = None
) -> list[dict[str, Any]]:
    """The rows (copies), every row of a flagged point marked `speedup_impossible` with its
    `speedup_impossible_reason`; the others as they are. Call it on rows `drift.mark_drift`
    has marked, so a drifted baseline is named as the cause."""
    out = [dict(r) for r in rows]
    found = impossible_speedups(out) if found is None else found
    if not found:
        return out
    reasons = {f.key: f.reason for f in found}
    for row in out:
        reason = reasons.get(_point_key(row)) if _measured(row) else None
        if reason is not None:
            row["speedup_impossible"] = True
            row["speedup_impossible_reason"] = reason
    return out


def impossible_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """A run's closing lines on its impossible speedups (none when there are none): one per
    likely cause, naming the points. The rows' baseline drift is marked here (`mark_drift`), so
    rows from the store need no preparation."""
    found = impossible_speedups(mark_drift(rows))
    hosts = {f.host for f in found}
    by_cause: dict[str, list[Impossible]] = {}
    for f in found:
        by_cause.setdefault(f.cause, []).append(f)
    lines = []
    for cause, group in by_cause.items():
        group.sort(key=lambda f: f.speedup.mean / f.tau, reverse=True)
        named = [
            f"{f.host + ' ' if len(hosts) > 1 else ''}{f.label} {f.at}: "
            f"{f.speedup.mean:.2f}x at tau {f.tau:.2f}"
            for f in group[:_NAMED]
        ]
        more = f"; and {len(group) - _NAMED} more" if len(group) > _NAMED else ""
        lines.append(
            f"impossible speedups: {len(group)} point(s) have a throughput speedup above their "
            f"tau ({'; '.join(named)}{more}): {cause}; their speedups are withheld"
        )
    return lines


def _measured(row: Mapping[str, Any]) -> bool:
    """A speculative closed-loop point with both a speedup and a tau to hold it against."""
    if row.get("mode") == "ar" or row.get("status") != "ok" or row.get("client_bound") is True:
        return False
    if not is_missing(row.get("rate")):
        return False
    return _finite(row.get("speedup")) and _finite(row.get("tau")) and float(row["tau"]) > 0


def _finite(value: Any) -> bool:
    if is_missing(value):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _point_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """(host, server config, request config, dataset): restarts of one server config share it
    (their `server_label`'s first restart's; a run written before labels were recorded: its
    server config columns); a dataset point (`analysis.datasets`) is its own per dataset."""
    label = row.get("server_label")
    if not is_missing(label):
        server: Any = (str(row.get("engine")), first_restart_label(str(label)))
    else:
        server = tuple(
            None if is_missing(row.get(c)) else row.get(c) for c in ServerConfigColumns.model_fields
        )
    dataset = row.get("dataset")
    return (
        str(row.get("host")),
        server,
        request_config_id(row),
        None if is_missing(dataset) else str(dataset),
    )


def _cause(rows: list[Mapping[str, Any]]) -> tuple[str, str]:
    """The likely cause, from the evidence the rows carry (several: all of them), as a sentence
    and in a few words."""
    causes: list[tuple[str, str]] = []
    if any(r.get("baseline_busy") is True for r in rows):
        causes.append(("its AR baseline was measured on a busy host", "busy baseline"))
    drifts = [float(r["baseline_drift"]) for r in rows if _finite(r.get("baseline_drift"))]
    if any(r.get("baseline_drifted") is True for r in rows):
        by = f" {max(drifts):.0%}" if drifts else ""
        causes.append((f"its AR baseline drifted{by} over the run", f"baseline drifted{by}"))
    busy = [r for r in rows if r.get("host_busy") is True]
    if busy:
        why = busy[0].get("host_busy_reason")
        detail = f" ({why})" if isinstance(why, str) and why else ""
        causes.append((f"the point itself was measured on a busy host{detail}", "busy point"))
    if not causes:
        return UNSEEN_CAUSE, UNSEEN_BRIEF
    return "; ".join(c for c, _ in causes), ", ".join(b for _, b in causes)
