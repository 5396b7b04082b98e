"""Where a start or a switch goes: named unix times, each logged once as it is reached.

Start-up logs one stderr line per phase, `ddtree_runtime phase NAME at +S.SSs` (seconds since the
process started), and `/server_info["startup"]` holds the same times as unix seconds, so a
controller reads them from either. A switch keeps its own (`/server_info["last_switch"]`).
"""

from __future__ import annotations

import os
import sys
import time

#: Start-up's phases, in order; a graph phase stays None where no graph is captured (CPU).
STARTUP = ("process_start", "weights_loaded", "graphs_captured", "ready")
#: A switch's phases, in order: asked, in-flight requests finished, the new engine built, its
#: graph captured (None where none is), warmed up and answering.
SWITCH = ("started", "drained", "built", "graphs_captured", "ready")


def process_start_time() -> float:
    """Unix seconds when this process started (the kernel's record, to its 10 ms tick), so
    interpreter start-up and imports count; the time of this call where /proc is missing."""
    now = time.time()
    try:
        with open("/proc/self/stat") as stat:
            # Field 22, after the parenthesised command name (which may hold spaces).
            ticks = int(stat.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return now
    alive_s = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return now - max(alive_s, 0.0)


class Phases:
    """Unix times of named phases (`names`, in order; None until reached)."""

    def __init__(self, names: tuple[str, ...], origin: float, log_prefix: str | None) -> None:
        self.times: dict[str, float | None] = dict.fromkeys(names)
        self.origin = origin
        self.log_prefix = log_prefix  # None: not logged

    def mark(self, name: str, at: float | None = None) -> None:
        """Phase `name` reached `at` (unix seconds; default now), logged as `PREFIX NAME at
        +S.SSs` when the phases have a log prefix."""
        if name not in self.times:
            raise KeyError(f"unknown phase {name!r}; phases: {', '.join(self.times)}")
        reached = time.time() if at is None else at
        self.times[name] = reached
        if self.log_prefix is not None:
            line = f"{self.log_prefix} {name} at +{reached - self.origin:.2f}s"
            print(line, file=sys.stderr, flush=True)

    def as_dict(self) -> dict[str, float | None]:
        return dict(self.times)
