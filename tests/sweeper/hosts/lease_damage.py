"""The ways a host's lease file is found damaged (issue 40 #3), shared by the local and the SSH
tests: each writes its damage through a `put(path, data)` and `mkdir(path)` of the host's own,
so the same cases run on this machine and on a test host.

A damage either leaves no lease to read (`refused`: the command stops naming the file) or a
dead holder's lease written by hand (`taken`: its exact bytes are swapped, the host leased)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweeper.hosts.lease import MAX_LEASE_BYTES, Holder

#: A gone holder: taken on another boot of the host (gone whatever its pid says).
GONE = {
    "sweep": "old",
    "run_id": "20261204T000000000Z-aaaaaa",
    "controller": "elsewhere",
    "controller_boot_id": "0" * 32,
    "pid": 4242,
    "pid_start": 1,
    "started_at": "2026-12-04T00:00:00+00:00",
    "host_boot_id": "0" * 32,
    "server": {},
    "token": "f" * 32,
}


def gone_text() -> bytes:
    return Holder.model_validate(GONE).text().encode()


@dataclass(frozen=True)
class Damage:
    """One way the lease is found: its bytes (None: `lease.json` is a directory; b"STATE": the
    state directory itself is a file) and the words the one line must hold."""

    name: str
    data: Callable[[], bytes | None]
    said: str
    #: A dead holder's lease in other bytes than this tool writes: taken over, not refused.
    taken: bool = False


DAMAGES = [
    Damage("empty", lambda: b"", "is empty"),
    Damage("white_space", lambda: b" \r\n", "holds only white space"),
    Damage("truncated", lambda: gone_text()[:40], "is not a lease (Invalid JSON"),
    Damage("empty_object", lambda: b"{}", "is not a lease (sweep: Field required)"),
    Damage("null", lambda: b"null", "is not a lease (Input should be an object)"),
    Damage(
        "pid_a_string",
        lambda: gone_text().replace(b'"pid": 4242', b'"pid": "4242"'),
        "is not a lease (pid: Input should be a valid integer)",
    ),  # fmt: skip
    Damage("not_utf8", lambda: b"\xff\xfe" + gone_text(), "is not UTF-8 text (byte 0)"),
    Damage("huge", lambda: gone_text() + b" " * 200_000, "bytes, more than any lease"),
    Damage("a_directory", lambda: None, "is a directory, not a file"),
    Damage("state_dir_a_file", lambda: b"STATE", "is a file, not a directory"),
    Damage("crlf", lambda: gone_text() + b"\r\n", "", taken=True),
    Damage("trailing_spaces", lambda: gone_text() + b"   ", "", taken=True),
    Damage("at_the_limit", lambda: gone_text().ljust(MAX_LEASE_BYTES), "", taken=True),
]


def damage(
    case: Damage, state_dir: str, put: Callable[[str, bytes], Any], mkdir: Callable[[str], Any]
) -> str:
    """Lay `case` down under `state_dir` (which must not exist yet); the lease's path."""
    lease = f"{state_dir}/lease.json"
    data = case.data()
    if data == b"STATE":
        put(state_dir, b"not a directory")
    elif data is None:
        mkdir(lease)
    else:
        mkdir(state_dir)
        put(lease, data)
    return lease
