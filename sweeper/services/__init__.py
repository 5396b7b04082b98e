"""How the runtime is kept running on a host: the `Service` interface.

A service starts one server config (an engine's `Launch`, `sweeper.engines.launch`) as an
`Instance`, reports its state, hands out its log lines since a cursor, and stops it.
`ProcessService` (a managed local process) lives in `process.py`; `SystemdService` (a systemd
unit on a remote host) in `systemd.py`; `SlurmStepService` (a job step in a Slurm allocation) in
`slurm.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sweeper.engines.launch import Launch


class ServiceError(RuntimeError):
    """The service could not be started or stopped; the message says why (with a log tail)."""


@dataclass(frozen=True)
class Instance:
    """One started runtime: where to reach it and what identifies it."""

    launch: Launch
    pid: int | None
    #: systemd's InvocationID, or the Slurm step id, when the service has one.
    invocation_id: str | None = None
    #: Where it runs, as record columns of its points (`slurm_job_id`, `slurm_step_id`,
    #: `slurm_node`); empty where the host says it all.
    placement: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceState:
    """A snapshot: is it running, and if it ended, how."""

    running: bool
    exited: bool
    exit_code: int | None = None
    detail: str = ""
    #: Why it is gone in the words of what ended it (the scheduler's state and exit code);
    #: a failed point's reason starts with it. Empty when the service cannot say.
    reason: str = ""
    #: The machine under the server was lost (a Slurm allocation ended), not the server: the
    #: remaining points can run on another machine.
    host_lost: bool = False
    placement: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Service(Protocol):
    """Starts, watches and stops the runtime on one host."""

    def start(self, launch: Launch) -> Instance:
        """Start a new instance; the previous one must already be stopped and its port free."""
        ...

    def state(self) -> ServiceState:
        """Current state of the most recently started instance."""
        ...

    def logs(self, cursor: str | None = None) -> tuple[str, str]:
        """Log text since `cursor` (None: from the instance's start) and the new cursor."""
        ...

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the instance (SIGTERM, then SIGKILL after timeout) and wait until it is gone."""
        ...
