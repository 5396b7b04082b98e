"""Reading a file back as state, safely: a run's manifest, records and views, a bisect's and a
search's state, a spec and its input files.

Whatever lies at a state file's path is looked at before it is read: a FIFO would block its
reader forever, a link to a device (`/dev/zero`) would be read without end, and a file larger
than any this tool writes would be read whole into memory. Each is refused before a byte is
read, as an `UnsafeStateFile` naming the file (an OSError: the commands' one line, exit 5,
`sweeper.commands.errors`); a directory is an IsADirectoryError and an absent file a
FileNotFoundError, as `open` says them. The file is opened without blocking and checked again
on its descriptor (what was looked at is what is read), and never more than its kind's cap is
read, even from a file that grows meanwhile or reports no size (`/proc`).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

_MiB = 1 << 20
_GiB = 1 << 30


@dataclass(frozen=True)
class Kind:
    """A kind of state file: what it is called in an error, and the most bytes one may hold
    (far above any this tool writes: past it the file is damage, never read whole)."""

    name: str
    cap: int


#: A bisect's state, a search's log of its trials, a run's synthetic inputs.
STATE = Kind("state file", 64 * _MiB)
#: A run's manifest: the resolved spec with every dataset's prompts expanded.
MANIFEST = Kind("manifest", 256 * _MiB)
#: A search's Optuna journal (a few lines per trial).
JOURNAL = Kind("study journal", 256 * _MiB)
#: A run's append-only records and its points view (requests: texts and token ids).
RECORDS = Kind("record file", 16 * _GiB)
#: A point's server log (its tail is shown).
LOG = Kind("log", 1 * _GiB)
#: A server's pidfile (its pid, start and launch id).
PIDFILE = Kind("pidfile", 4096)
#: A run lock (the holder's pid).
LOCK = Kind("lock file", 1 * _MiB)
#: A spec file.
SPEC = Kind("spec", 16 * _MiB)
#: A spec's input file: a prompts or dataset file, a reference table.
INPUT = Kind("input file", 16 * _GiB)


class UnsafeStateFile(OSError):
    """A state file that is not read: not a regular file, or larger than its kind's cap."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(None, problem, str(path))

    def __str__(self) -> str:
        return f"{self.strerror}: {self.filename}"


def check(path: str | os.PathLike[str], kind: Kind) -> int:
    """The size of the regular file at `path` (a link to one counts as one), after checking it
    is one and within `kind`'s cap; never opens it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UnsafeStateFile(path, "is a link to nothing") from None
        raise
    return _checked(path, info, kind)


def read_state(path: str | os.PathLike[str], kind: Kind) -> bytes:
    """The bytes of the regular file at `path`, at most `kind.cap` of them (module docstring)."""
    check(path, kind)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        data = handle.read(_checked(path, os.fstat(fd), kind) + 1)
        # A file that grew since, or says no size (/proc): on, never past the cap.
        while len(data) <= kind.cap and (more := handle.read(min(_MiB, kind.cap + 1 - len(data)))):
            data += more
    if len(data) > kind.cap:
        raise UnsafeStateFile(path, f"holds more than any {kind.name} ({_size(kind.cap)})")
    return data


def _checked(path: str | os.PathLike[str], info: os.stat_result, kind: Kind) -> int:
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):
        raise UnsafeStateFile(path, f"not a regular file ({_what(mode)})")
    if info.st_size > kind.cap:
        raise UnsafeStateFile(
            path, f"holds {info.st_size} bytes, more than any {kind.name} ({_size(kind.cap)})"
        )
    return info.st_size


def _what(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return f"mode {mode:o}"


def _size(cap: int) -> str:
    if cap % _GiB == 0:
        return f"{cap // _GiB} GiB"
    return f"{cap // _MiB} MiB" if cap % _MiB == 0 else f"{cap} bytes"
