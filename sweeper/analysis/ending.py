"""What a run's last lines say: what its report would flag, in a few lines at the terminal.

The person watching a sweep reads its last lines, not always its report. So they say what the
report says, in its order of weight: busy points and the speedups withheld for them, the AR
baseline's drift, points left unproven, impossible speedups (above tau). Each is a line (or a
few) with the count, an example point and why; nothing is said of what is clean. The exit
code's meaning comes after these, from the command (`sweeper.exit_codes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sweeper.analysis.drift import baseline_drift, drift_line
from sweeper.analysis.impossible import impossible_lines
from sweeper.analysis.objective import SPEEDUPS
from sweeper.config.labels import point_label_long
from sweeper.proof.unproven import unproven_lines
from sweeper.results.rows import is_missing


def closing_lines(points: Iterable[Mapping[str, Any]]) -> list[str]:
    """The run's closing lines from its judged point rows ([] for a clean run)."""
    rows = [dict(p) for p in points]
    drift = drift_line(baseline_drift(rows))
    return [
        *busy_lines(rows),
        *([drift] if drift else []),
        *unproven_lines(rows),
        *impossible_lines(rows),
    ]


def busy_lines(points: Iterable[Mapping[str, Any]], shown: int = 3) -> list[str]:
    """The busy points (`host_busy`) with why, and the speedups withheld for them (theirs and
    those compared with a busy baseline); [] on a quiet run."""
    rows = [p for p in points if p.get("status") == "ok"]
    busy = [p for p in rows if p.get("host_busy") is True]
    against = [p for p in rows if p.get("host_busy") is not True and p.get("baseline_busy") is True]
    if not busy and not against:
        return []
    withheld = [
        p
        for p in [*busy, *against]
        if p.get("mode") != "ar" and any(not is_missing(p.get(c)) for c in SPEEDUPS)
    ]
    lines = [
        f"busy host: {len(busy)} point(s) measured beside other load"
        + (f", {len(against)} more against a baseline measured so" if against else "")
        + f"; {len(withheld)} speedup(s) withheld (best, search; the report flags them):"
    ]
    for point in busy[:shown]:
        why = point.get("host_busy_reason")
        why = "no reason recorded" if is_missing(why) or not why else str(why)
        lines.append(f"  {point_label_long(point)} on {point.get('host')}: {why}")
    if len(busy) > shown:
        lines.append(f"  ... {len(busy) - shown} more busy point(s); see the report")
    return lines
