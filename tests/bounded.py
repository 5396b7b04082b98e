"""A deadline and a memory cap for code run in-process that could hang or read without end (a
state file that is a FIFO, or a link to /dev/zero): it fails the test with `Hung` after the
deadline, and an allocation past the cap is a MemoryError, never the machine's RAM."""

from __future__ import annotations

import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

#: Address space the block may add to what the process already maps.
MEMORY = 2 << 30


class Hung(BaseException):
    """Still running at the deadline (a BaseException: no `except Exception` turns it into an
    exit code)."""


@contextmanager
def bounded(seconds: float, memory: int = MEMORY) -> Iterator[None]:
    """Run the block (in the main thread) under a deadline and `memory` more address space."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped() + memory
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)

    def alarm(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _mapped() -> int:
    """Bytes of address space the process maps now (VmSize)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")
