"""An exclusive, non-blocking run lock: `fcntl.flock` on a file that holds the holder's pid.

The kernel drops a flock when its holder dies, however it dies, so a dead run's lock is
recovered by simply taking it; the pid left in the file says whose it was. The file is never
deleted (deleting a lock file while another process waits on it would split the lock in two).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sweeper.statefile import LOCK, UnsafeStateFile, check, read_state


class LockBusy(RuntimeError):
    """Another live process holds the lock."""

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid else "an unknown process"
        super().__init__(f"{path} is held by {holder}: another run is in progress")
        self.pid = pid


@dataclass
class Held:
    """A taken lock; `recovered_from` is the pid of a dead holder whose lock this took over."""

    path: Path
    recovered_from: int | None


def _read_pid(handle: object) -> int | None:
    assert hasattr(handle, "seek") and hasattr(handle, "read")
    handle.seek(0)
    return _pid(handle.read(LOCK.cap))


def _pid(data: str | bytes) -> int | None:
    text = data.strip()
    return int(text) if text.isdigit() else None


@contextmanager
def run_lock(path: Path) -> Iterator[Held]:
    """Hold `path` exclusively for the block; raise LockBusy at once if a live process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        check(path, LOCK)  # a FIFO or a device there is said, never locked nor read
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockBusy(path, _read_pid(handle)) from None
        previous = _read_pid(handle)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield Held(path, previous if previous and previous != os.getpid() else None)
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def live_holder(path: Path) -> int | None:
    """The pid of the live process holding `path`'s lock, or None when nobody does. It only
    reads (the kernel's table of flocks, else the pid in the file, checked alive): taking the
    lock to test it would make a run starting at that instant fail as "busy"."""
    try:
        stat = path.stat()
        recorded = _pid(read_state(path, LOCK))
    except UnsafeStateFile:
        raise  # a FIFO or a device in its place: said, never read as no holder
    except OSError:
        return None
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return recorded if recorded and _alive(recorded) else None
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2146368 0 EOF"; a waiter's line has "->".
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
            return int(fields[4]) if fields[4].isdigit() else recorded
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
