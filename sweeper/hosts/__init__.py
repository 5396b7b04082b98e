"""Where commands run: the `Host` interface shared by the local machine and SSH hosts.

A host runs argv lists (never shell strings: a remote host gets `shlex.join(argv)`, so every spec
value reaches a shell only quoted), writes files atomically, reads files, and opens a tunnel to a
port on the host. `LocalHost` lives in `local.py`, `SSHHost` in `ssh.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class HostError(RuntimeError):
    """A command could not be run, or exited non-zero with `check=True`."""


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its exit code and its captured output."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@runtime_checkable
class Host(Protocol):
    """A machine the sweeper runs the runtime on."""

    name: str
    #: Address at which the runtime's port is reached from the controller (no tunnel).
    address: str

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        """Run argv; raise HostError on a non-zero exit when check is true (message has stderr)."""
        ...

    def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write a file atomically (temp file in the same directory + rename)."""
        ...

    def read_file(self, path: str) -> bytes:
        """Read a whole file; raise FileNotFoundError when absent."""
        ...

    def open_tunnel(self, remote_port: int) -> AbstractContextManager[int]:
        """Forward a free local port to `remote_port` on the host; yields the local port."""
        ...

    def close(self) -> None:
        """Release connections; the host object may not be used afterwards."""
        ...
