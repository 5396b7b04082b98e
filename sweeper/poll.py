"""The one wait-until loop: poll a check until it gives a result, the deadline passes, or the
thing waited on dies.

Every wait in the sweeper (a port to free, a process group to end, a unit's new invocation, a
server's /health) is this loop with its own check, so deadlines, interval caps and the "did it
die?" test behave the same everywhere. The interval starts at `interval_s` and doubles up to
`max_interval_s` (constant when that is None): fast detection at first without hammering a slow
start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class WaitTimeout(RuntimeError):
    """The check gave no result before the deadline."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"not done after {waited_s:.1f} s")
        self.waited_s = waited_s


class WaitAborted(RuntimeError):
    """`died` reported that what was waited on is gone; the message is its reason."""


@dataclass(frozen=True)
class Waited(Generic[T]):
    """A check's result and how long it took to get it."""

    value: T
    seconds: float


def wait_until(
    check: Callable[[], T | None],
    *,
    timeout_s: float,
    interval_s: float = 0.05,
    max_interval_s: float | None = None,
    died: Callable[[], str | None] | None = None,
) -> Waited[T]:
    """Call `check` until it returns something other than None (or False); return it.

    `died`, called before each check, returns a reason when waiting is pointless (the process
    exited); then `WaitAborted(reason)` is raised. Past `timeout_s`, `WaitTimeout`. The check is
    always tried once, even with a zero timeout.
    """
    started = time.monotonic()
    interval = interval_s
    while True:
        if died is not None:
            reason = died()
            if reason:
                raise WaitAborted(reason)
        value = check()
        waited = time.monotonic() - started
        if value is not None and value is not False:
            return Waited(value, waited)
        remaining = timeout_s - waited
        if remaining <= 0:
            raise WaitTimeout(waited)
        time.sleep(min(interval, remaining))
        if max_interval_s is not None:
            interval = min(interval * 2, max_interval_s)
