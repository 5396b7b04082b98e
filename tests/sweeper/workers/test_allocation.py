"""The one allocation lifecycle the sweep's workers and the doctor share, without a cluster: a
scripted login host answers squeue line by line. Running, ended before it ran, late, given up,
an squeue that does not answer (asked again; past the deadline its error); and the options a
host of the spec asks sbatch for, with the doctor's cap on the time limit."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from sweeper.hosts import HostError
from sweeper.hosts.slurm import Allocation, SlurmLogin
from sweeper.hosts.slurm_commands import AllocationOptions, JobLine
from sweeper.spec import SlurmHostSpec
from sweeper.workers.allocation import Requested, allocate, allocation_options

PENDING = JobLine("PENDING", "Resources", "", "")
RUNNING = JobLine("RUNNING", "None", "n1", "10:00")


class ScriptedLogin:
    """squeue's answers in order (an exception is raised; the last answer repeats)."""

    def __init__(self, *answers: JobLine | None | Exception) -> None:
        self.answers = list(answers)
        self.cancelled: list[str] = []

    def submit(self) -> str:
        return "7"

    def job(self, job: str) -> JobLine | None:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def allocation(self, job: str, line: JobLine) -> Allocation:
        return Allocation(job, line.node, "10.0.0.1", 4)

    def end_reason(self, job: str) -> str:
        return f"slurm job {job} FAILED (reason NonZeroExitCode, exit code 1:0) on n1"

    def cancel(self, job: str) -> None:
        self.cancelled.append(job)


def _allocate(login: ScriptedLogin, **kwargs: Any) -> Requested:
    return allocate(cast(SlurmLogin, login), poll_s=0.001, **kwargs)


def test_a_job_that_runs_is_the_allocation_and_stays_uncancelled() -> None:
    login = ScriptedLogin(PENDING, HostError("squeue failed: Socket timed out"), RUNNING)
    heard: list[tuple[str, str]] = []
    asked = _allocate(
        login, deadline_s=None, queued=lambda job, line, _w: heard.append((job, line.reason))
    )
    assert asked.allocation is not None
    assert (asked.allocation.job, asked.allocation.node) == ("7", "n1")
    assert (asked.ended, asked.late) == (None, None)
    assert heard == [("7", "Resources")]  # an squeue that did not answer is asked again
    assert login.cancelled == []


@pytest.mark.parametrize("line", [None, JobLine("FAILED", "NonZeroExitCode", "n1", "")])
def test_a_job_that_ends_before_it_runs_gives_the_schedulers_words(line: JobLine | None) -> None:
    login = ScriptedLogin(PENDING, line)
    asked = _allocate(login, deadline_s=None)
    assert asked.allocation is None and asked.late is None
    assert asked.ended == "slurm job 7 FAILED (reason NonZeroExitCode, exit code 1:0) on n1"
    assert login.cancelled == ["7"]


def test_a_job_still_queued_at_the_deadline_is_cancelled_with_its_last_line() -> None:
    login = ScriptedLogin(PENDING)
    asked = _allocate(login, deadline_s=0.01)
    assert asked.late == PENDING and asked.waited > 0.01
    assert asked.allocation is None and asked.ended is None
    assert login.cancelled == ["7"]


@pytest.mark.parametrize("answer", [PENDING, HostError("squeue failed")])
def test_giving_up_or_stopping_cancels_the_request(answer: JobLine | Exception) -> None:
    for stop, give_up in ((threading.Event(), lambda: True), (_set(), lambda: False)):
        login = ScriptedLogin(answer)
        asked = _allocate(login, deadline_s=None, stop=stop, give_up=give_up)
        assert (asked.allocation, asked.ended, asked.late) == (None, None, None)
        assert login.cancelled == ["7"]


def test_an_squeue_silent_past_the_deadline_raises_its_error_and_cancels() -> None:
    login = ScriptedLogin(HostError("cluster: squeue failed: Socket timed out"))
    with pytest.raises(HostError, match="Socket timed out"):
        _allocate(login, deadline_s=0.01)
    assert login.cancelled == ["7"]


def _set() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


def _host(**fields: object) -> SlurmHostSpec:
    return SlurmHostSpec.model_validate(
        {"name": "c", "address": "login", "shared_dir": "/shared", **fields}
    )


@pytest.mark.parametrize(
    ("limit", "capped", "expected"),
    [
        (None, None, None),
        ("4:00:00", None, "4:00:00"),
        (None, 15, "15"),
        ("4:00:00", 15, "15"),
        ("10", 15, "10"),
    ],
)
def test_the_options_come_from_the_host_and_the_cap_bounds_the_time_limit(
    limit: str | None, capped: int | None, expected: str | None
) -> None:
    host = _host(
        time_limit=limit,
        partition="gpu",
        account="a",
        qos="q",
        constraint="h100",
        gpus_per_node=8,
        sbatch_args=["--reservation=bench"],
    )
    assert allocation_options(host, max_minutes=capped) == AllocationOptions(
        time_limit=expected,
        gpus_per_node=8,
        partition="gpu",
        account="a",
        qos="q",
        constraint="h100",
        extra=("--reservation=bench",),
    )
