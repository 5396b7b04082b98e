"""Reading a start's phases from a server's log (the adapters' `startup_phases`): each engine
names how its lines carry their time (`LogClock`) and which of its own lines end a phase; this
reads them. The log's times are wall-clock times of the host, in its local time zone; they are
placed against `started`, the unix time the sweeper saw the process start (a host whose clock or
time zone differs from the controller's gives times the recorder refuses:
`sweeper.results.loads.within_start`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sweeper.results.loads import PhaseName, StartPhase

#: A log line kept as a phase's evidence is cut to this many characters.
EVIDENCE_CHARS = 160


@dataclass(frozen=True)
class LogClock:
    """How an engine's log lines say their time: `pattern` finds it (group `stamp`, and an
    optional group `frac`: the digits of a fraction of a second), `fmt` reads the stamp
    (`datetime.strptime`); a format without the year (vLLM's `%m-%d %H:%M:%S`) is read in the
    year that puts it nearest the start."""

    pattern: re.Pattern[str]
    fmt: str

    def read(self, line: str, started: float) -> float | None:
        """The line's unix time, or None when it carries none."""
        found = self.pattern.search(line)
        if found is None:
            return None
        stamp, frac = found.group("stamp"), found.groupdict().get("frac")
        fraction = float(f"0.{frac}") if frac else 0.0
        if "%Y" in self.fmt:
            return datetime.strptime(stamp, self.fmt).timestamp() + fraction
        year = datetime.fromtimestamp(started).year
        candidates = (
            datetime.strptime(f"{y} {stamp}", f"%Y {self.fmt}").timestamp()
            for y in (year - 1, year, year + 1)
        )
        return min(candidates, key=lambda t: abs(t - started)) + fraction


def log_phases(
    log: str,
    started: float,
    clock: LogClock,
    marks: Sequence[tuple[PhaseName, Sequence[str]]],
) -> list[StartPhase]:
    """`process_up` at the first line with a time, then each mark's phase at the last line
    holding one of its texts (the first text found wins: a later one is a fallback), in
    seconds since `started`; a phase none of whose texts is in the log is absent."""
    lines = log.splitlines()
    phases: list[StartPhase] = []
    for line in lines:
        at = clock.read(line, started)
        if at is not None:
            phases.append(_phase("process_up", at - started, line))
            break
    for name, texts in marks:
        for text in texts:
            hits = [line for line in lines if text in line]
            if hits:
                at = clock.read(hits[-1], started)
                phases.append(_phase(name, None if at is None else at - started, hits[-1]))
                break
    return phases


def _phase(name: PhaseName, at_s: float | None, line: str) -> StartPhase:
    return StartPhase(name=name, at_s=at_s, source="log", evidence=line.strip()[:EVIDENCE_CHARS])
