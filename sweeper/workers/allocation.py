"""A Slurm allocation from request to RUNNING, in one place for the sweep's workers and the doctor.

`allocation_options` is what sbatch is asked for a host of the spec (the doctor caps the time
limit of its short allocation); `allocate` submits one holding job and waits until it runs,
ends before it ran (the scheduler's words), waits past its deadline, or the caller gives up:
anything but RUNNING is cancelled before it returns. An squeue that does not answer (slurmctld
busy) is asked again, never taken for the job's end; past the deadline its error is raised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sweeper.hosts import HostError
from sweeper.hosts.slurm import Allocation, SlurmLogin
from sweeper.hosts.slurm_commands import AllocationOptions, JobLine
from sweeper.spec import SlurmHostSpec
from sweeper.spec.hosts import slurm_time_seconds

#: squeue states of a job that may still run.
WAITING = ("PENDING", "CONFIGURING")


def allocation_options(
    host_spec: SlurmHostSpec, *, max_minutes: int | None = None
) -> AllocationOptions:
    """sbatch's options for one allocation on the host; `max_minutes` caps the spec's time
    limit (and stands in for an unlimited one)."""
    limit = host_spec.time_limit
    if max_minutes is not None and (
        limit is None or (slurm_time_seconds(limit) or 0) > max_minutes * 60
    ):
        limit = str(max_minutes)
    return AllocationOptions(
        time_limit=limit,
        gpus_per_node=host_spec.gpus_per_node,
        partition=host_spec.partition,
        account=host_spec.account,
        qos=host_spec.qos,
        constraint=host_spec.constraint,
        extra=tuple(host_spec.sbatch_args),
    )


@dataclass(frozen=True)
class Requested:
    """How one request for a node ended: at most one of `allocation`, `ended`, `late` is set;
    none when the caller gave up. Only a running allocation is left uncancelled."""

    job: str
    #: Seconds from submission to the answer.
    waited: float
    allocation: Allocation | None = None
    #: The job ended before it ran: the scheduler's words.
    ended: str | None = None
    #: The job still waited at the deadline: squeue's last line about it.
    late: JobLine | None = None


def allocate(
    login: SlurmLogin,
    *,
    deadline_s: float | None,
    poll_s: float = 1.0,
    stop: threading.Event | None = None,
    give_up: Callable[[], bool] = lambda: False,
    queued: Callable[[str, JobLine, float], None] = lambda _job, _line, _waited: None,
) -> Requested:
    """Submit one allocation and wait for it (see the module docstring); `queued(job, line,
    waited)` hears every look at a waiting job. AllocationRefused when sbatch refuses it."""
    job = login.submit()
    pause = stop or threading.Event()
    started = time.monotonic()
    while True:
        try:
            line = login.job(job)
        except HostError:
            if pause.is_set() or give_up():
                login.cancel(job)
                return Requested(job, time.monotonic() - started)
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                login.cancel(job)
                raise
            pause.wait(poll_s)  # squeue did not answer: ask again
            continue
        waited = time.monotonic() - started
        if line is not None and line.state == "RUNNING":
            return Requested(job, waited, allocation=login.allocation(job, line))
        if line is None or line.state not in WAITING:
            ended = login.end_reason(job)
            login.cancel(job)
            return Requested(job, waited, ended=ended)
        if pause.is_set() or give_up():
            login.cancel(job)
            return Requested(job, waited)
        if deadline_s is not None and waited > deadline_s:
            login.cancel(job)
            return Requested(job, waited, late=line)
        queued(job, line, waited)
        pause.wait(poll_s)
