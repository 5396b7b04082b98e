"""The AR baseline's drift over a run: one baseline measured again, and how far it moved.

A speedup divides a config's throughput by its AR baseline's, measured minutes apart. With
`repeats.restarts: K` each baseline is measured again every round, just before that round's
speculative configs (a search measures its AR restarts first, back to back); how far those
measurements of one baseline (host, flags, request config) moved is its drift: the first and
the last output tok/s, and the largest change from the first. Beyond `DRIFT_LIMIT` the speedups
against that baseline are `baseline_drifted`: the report flags them and `best` withholds a
speedup objective measured once, as it does one measured on a busy host (with 2+ restarts each
divides by its own round's baseline, so the movement is inside the speedup's interval). The
limit is 10%: below the 5-50% a tuned speculative config is after (SGLang's AutoSpec); a
denominator that moved more than that cannot tell them apart. (Quiet restarts of smollm2 on a
shared 2-core CPU moved up to 14%: there a lone speedup is rightly not trusted.)
`repeats.baseline_every` adds measurements between configs (drift checks, never denominators).
With one measurement per baseline there is no drift to see, and none is reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.analysis.objective import request_config_id
from sweeper.config.labels import point_label
from sweeper.results.records import extra_config_columns
from sweeper.results.rows import is_missing

#: Largest change of a baseline from its first measurement that its speedups survive.
DRIFT_LIMIT = 0.10
#: What a baseline is besides its host and request config: its non-speculative flags.
_FLAG_COLUMNS = ("cuda_graph",)
#: What `mark_drift` adds to a row: derived here, never recorded, so no grid flag.
DRIFT_COLUMNS = ("baseline_drift", "baseline_drifted")


@dataclass(frozen=True)
class Drift:
    """One AR baseline's measurements in the order they were taken."""

    host: str
    label: str
    at: str
    #: The flags that make it this baseline (cuda_graph, extra flags), unset ones left out.
    flags: tuple[tuple[str, Any], ...]
    values: tuple[float, ...]

    @property
    def first(self) -> float:
        return self.values[0]

    @property
    def last(self) -> float:
        return self.values[-1]

    @property
    def max_drift(self) -> float:
        """The largest relative change from the first measurement (0.12: 12%)."""
        return max(abs(v / self.first - 1.0) for v in self.values) if self.first else 0.0

    @property
    def drifted(self) -> bool:
        return self.max_drift > DRIFT_LIMIT

    def covers(self, row: Mapping[str, Any]) -> bool:
        """Whether a speculative point row is compared with this baseline."""
        return (
            str(row.get("host")) == self.host
            and request_config_id(row) == self.at
            and all(_value(row, k) == v for k, v in self.flags)
        )


def baseline_drift(rows: Iterable[Mapping[str, Any]]) -> list[Drift]:
    """Every AR baseline measured more than once (ok points with a throughput), in run order."""
    rows = list(rows)
    flag_columns = [
        *_FLAG_COLUMNS,
        *sorted(
            c
            for c in extra_config_columns({c for r in rows for c in r})
            if c not in ("restart", *DRIFT_COLUMNS)
        ),
    ]
    series: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("mode") != "ar" or row.get("status") != "ok":
            continue
        if is_missing(row.get("output_tok_s")):
            continue
        flags = tuple((k, _value(row, k)) for k in flag_columns if _value(row, k) is not None)
        key = (str(row.get("host")), flags, request_config_id(row))
        series.setdefault(key, []).append(row)
    out = []
    for (host, flags, at), measured in series.items():
        if len(measured) < 2:
            continue
        measured.sort(key=lambda r: (str(r.get("started_at") or ""), _restart(r)))
        values = tuple(float(r["output_tok_s"]) for r in measured)
        out.append(Drift(host, point_label(measured[0]), at, flags, values))
    return out


def mark_drift(
    rows: Iterable[Mapping[str, Any]], drifts: list[Drift] | None = None
) -> list[dict[str, Any]]:
    """The rows, each speculative one compared with a drifted baseline marked
    `baseline_drifted` (with the drift in `baseline_drift`); the others as they are."""
    out = [dict(r) for r in rows]
    drifted = [d for d in (baseline_drift(out) if drifts is None else drifts) if d.drifted]
    if not drifted:
        return out
    for row in out:
        if row.get("mode") == "ar":
            continue
        hits = [d.max_drift for d in drifted if d.covers(row)]
        if hits:
            row["baseline_drifted"] = True
            row["baseline_drift"] = max(hits)
    return out


def drift_line(drifts: list[Drift]) -> str:
    """One line for the run's summary: the worst baseline's drift ("" without re-measurements)."""
    if not drifts:
        return ""
    worst = max(drifts, key=lambda d: d.max_drift)
    flagged = sum(d.drifted for d in drifts)
    verdict = (
        f"{flagged} beyond {DRIFT_LIMIT:.0%}: their speedups are flagged "
        "(best withholds one measured once)"
        if flagged
        else f"within {DRIFT_LIMIT:.0%}"
    )
    return (
        f"AR baseline drift: max {worst.max_drift:.1%} ({worst.host} {worst.label} {worst.at}: "
        f"first {worst.first:.4g}, last {worst.last:.4g} tok/s over {len(worst.values)} "
        f"measurements); {len(drifts)} baseline(s) re-measured, {verdict}"
    )


def _value(row: Mapping[str, Any], key: str) -> Any:
    value = row.get(key)
    if is_missing(value):
        return None
    return bool(value) if key == "cuda_graph" else value


def _restart(row: Mapping[str, Any]) -> int:
    value: Any = row.get("restart")
    return 0 if is_missing(value) else int(value)
