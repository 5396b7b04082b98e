"""Where each start of a server went: one record per load (one process start of the target's
weights), with the phases the server's own log or API reported, in seconds since its process
started. The manifest keeps them (`Manifest.loads`); a run written before they existed has none.

Phases, in the order a start passes them: `process_up` (the server's first time-stamped log line,
or its own process start), `weights_loaded`, `graphs_captured` (torch.compile or CUDA/CPU graph
capture; absent where the server does neither), `ready` (the server says it is ready, or the
sweeper's health poll first answered 200). A phase the server does not report is absent; one it
reports without a time has no `at_s`. Nothing is estimated.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

PhaseName = Literal["process_up", "weights_loaded", "graphs_captured", "ready"]
#: The phases in the order a start passes them.
PHASES: tuple[PhaseName, ...] = get_args(PhaseName)
#: Where a phase's time was read: the server's API (`/server_info`), its log, or the sweeper's
#: own health poll (ready only).
PhaseSource = Literal["api", "log", "health"]


class StartPhase(BaseModel):
    """One phase of a start: when it ended, in seconds since the process started."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: PhaseName
    #: Seconds since the process started; None where the server gave the phase no usable time
    #: (`evidence` says why).
    at_s: float | None
    source: PhaseSource
    #: What it was read from: the log line (cut) or the API field.
    evidence: str = ""


class LoadRecord(BaseModel):
    """One start of a server config on a host and the phases it went through."""

    model_config = ConfigDict(extra="forbid")

    host: str
    #: The server config's label (`ServerConfig.label`).
    label: str
    #: The host's loads in this run before this one (0: its first).
    index: int
    launch_id: str
    #: When the sweeper saw the process started (UTC, ISO 8601).
    started_at: str
    #: Seconds from then until the health poll answered 200 (the run's `<host>.ready_s`).
    ready_s: float
    phases: list[StartPhase] = Field(default_factory=list)

    def durations(self) -> dict[PhaseName, float | None]:
        """Each phase's own seconds: from the previous phase with a time (the process start
        for the first) to this one; None for a phase absent or without a time."""
        at = {p.name: p.at_s for p in self.phases}
        out: dict[PhaseName, float | None] = {}
        previous = 0.0
        for name in PHASES:
            value = at.get(name)
            out[name] = None if value is None else value - previous
            previous = previous if value is None else value
        return out


#: How far (s) a server's time may fall outside its start and still be read: its log's times are
#: cut to the second.
SLACK_S = 1.0


def within_start(phases: list[StartPhase], ready_s: float) -> list[StartPhase]:
    """`phases` with the time taken from any the server places outside its start (more than
    `SLACK_S` before the process started or after the health poll saw it ready: a host clock
    or time zone unlike the controller's), the evidence saying where it was placed."""
    kept = []
    for phase in phases:
        at = phase.at_s
        if at is not None and not -SLACK_S <= at <= ready_s + SLACK_S:
            outside = f"placed at {at:+.2f} s, outside this start (0 to {ready_s:.2f} s)"
            phase = phase.model_copy(
                update={"at_s": None, "evidence": f"{outside}: {phase.evidence}"}
            )
        kept.append(phase)
    return kept
