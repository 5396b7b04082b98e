"""The Slurm workers' watchdog without a cluster: a login host scripted to say what squeue and
the scheduler's record say. An ended job is lost with the scheduler's words; when those words
cannot be had, it is still lost after a few looks (a point in flight must never wait on a dead
node for good); a squeue that cannot answer is not an end."""

from __future__ import annotations

import time
from typing import Any, cast

from sweeper.hosts import HostError
from sweeper.hosts.slurm import Allocation, SlurmLogin
from sweeper.hosts.slurm_commands import JobLine
from sweeper.workers.slurm import END_REASON_TRIES, _Watchdog

NODE_FAIL = JobLine("NODE_FAIL", "NodeDown", "n2", "29:00")


class ScriptedLogin:
    """squeue's answers and the scheduler's reasons in turn (the last of each repeats); a
    HostError in either is raised, as a login host that did not answer."""

    def __init__(self, lines: list[Any], reasons: list[Any]) -> None:
        self.lines, self.reasons = lines, reasons
        self.asked_reason = 0

    def job(self, job: str) -> JobLine | None:
        return cast("JobLine | None", _next(self.lines))

    def end_reason(self, job: str) -> str:
        self.asked_reason += 1
        return cast(str, _next(self.reasons))


def _next(script: list[Any]) -> Any:
    answer = script.pop(0) if len(script) > 1 else script[0]
    if isinstance(answer, HostError):
        raise answer
    return answer


def _watched(login: ScriptedLogin, wait_s: float = 2.0) -> tuple[Allocation, float]:
    """Watch a fresh allocation every 10 ms until it is lost or `wait_s` passes."""
    allocation = Allocation("7", "n2", "10.0.0.2", 2)
    began = time.monotonic()
    watchdog = _Watchdog(cast(SlurmLogin, login), allocation, 0.01)
    try:
        allocation.lost_event.wait(wait_s)
    finally:
        watchdog.close()
    return allocation, time.monotonic() - began


def test_an_ended_job_is_lost_with_the_schedulers_words() -> None:
    said = "node failure: slurm job 7 NODE_FAIL (reason NodeDown, exit code 0:0) on n2"
    running = JobLine("RUNNING", "None", "n2", "29:00")
    login = ScriptedLogin([running, running, NODE_FAIL], [HostError("ssh: timed out"), said])
    allocation, _ = _watched(login)
    assert allocation.lost == said  # one failed ask for the words is retried


def test_an_ended_job_whose_reason_keeps_failing_is_lost_all_the_same() -> None:
    for line in (NODE_FAIL, None):
        login = ScriptedLogin([line], [HostError("sacct: timed out")])
        allocation, took = _watched(login)
        state = "NODE_FAIL" if line else "is gone"
        assert allocation.lost == f"slurm job 7 {state} (no reason: sacct: timed out)"
        assert login.asked_reason == END_REASON_TRIES and took < 1.0


def test_a_squeue_that_cannot_answer_is_not_an_end() -> None:
    login = ScriptedLogin([HostError("squeue: Socket timed out")], ["unused"])
    allocation, _ = _watched(login, wait_s=0.3)
    assert allocation.lost is None and login.asked_reason == 0
