"""The time between one server config's last point and the next config's first, per run.

From a run's points.jsonl: the last point's measurement end (`finished_at`) to the next
config's first `started_at` (the full gap), split by a time-stamped `sweeper run --plain` log
(each line prefixed with unix seconds, e.g. piped through `ts '%.s'`) at the last point's
`[n/N]` record line: its proof (scoring, judging, writing) and the start (a load or a switch,
the identity proof, negotiation). Gaps into a confirmation (restart > 0) are shown apart.

    python bench/config_gaps.py RUN_DIR:STAMPED_LOG [RUN_DIR:STAMPED_LOG ...]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

RECORDED = re.compile(r"^(\d+(?:\.\d+)?) \S+: \[\d+/\d+\] \w+ (\S+)")


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.1f} s" if values else "-"


def gaps(run_dir: Path, log: Path) -> str:
    """One line of figures for one run."""
    points = [json.loads(line) for line in (run_dir / "points.jsonl").open()]
    points.sort(key=lambda p: _t(p["started_at"]))
    recorded = {}
    for line in log.open():
        if match := RECORDED.match(line):
            recorded[match[2]] = float(match[1])
    full, proof, start, confirming = [], [], [], []
    for last, first in zip(points, points[1:], strict=False):
        if last["server_config_id"] == first["server_config_id"]:
            continue
        gap = _t(first["started_at"]) - _t(last["finished_at"])
        if first.get("restart"):
            confirming.append(gap)
            continue
        full.append(gap)
        if (at := recorded.get(last["point_id"])) is not None:
            proof.append(at - _t(last["finished_at"]))
            start.append(_t(first["started_at"]) - at)
    return (
        f"{run_dir.name}: {len(points)} points; {len(full)} config changes: gap {_mean(full)} "
        f"= last point's proof {_mean(proof)} + start {_mean(start)}; into a confirmation "
        f"{_mean(confirming)} ({len(confirming)})"
    )


def main() -> None:
    for arg in sys.argv[1:]:
        run_dir, _, log = arg.partition(":")
        print(gaps(Path(run_dir), Path(log)))


if __name__ == "__main__":
    main()
