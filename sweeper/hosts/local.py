"""The controller's own machine as a `Host`: commands run as subprocesses, no tunnel needed;
its state directory (where its lease lies) and what /proc says of a process's start."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from sweeper.hosts import CommandResult, HostError


def local_state_dir() -> str:
    """The controller machine's own state directory (its host lease): `$SWEEPER_STATE_DIR`,
    else `$XDG_STATE_HOME/ddtree-sweeper`, else `~/.local/state/ddtree-sweeper`."""
    explicit = os.environ.get("SWEEPER_STATE_DIR")
    if explicit:
        return str(Path(explicit).expanduser().resolve())
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(base) / "ddtree-sweeper")


def process_start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (field 22 of /proc/pid/stat): with the
    pid, it names one process (a recycled pid has another start). None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return int(stat.rsplit(")", 1)[1].split()[19])


class LocalHost:
    """Runs argv lists on this machine; the runtime's port is reached on 127.0.0.1 directly."""

    def __init__(self, name: str = "local", address: str = "127.0.0.1") -> None:
        self.name = name
        self.address = address

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        full = ["sudo", "-n", *argv] if sudo else list(argv)
        merged = {**os.environ, **env} if env else None
        try:
            proc = subprocess.run(
                full, capture_output=True, text=True, timeout=timeout, env=merged, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HostError(f"{self.name}: cannot run {full[0]!r}: {exc}") from exc
        result = CommandResult(tuple(full), proc.returncode, proc.stdout, proc.stderr)
        if check and not result.ok:
            raise HostError(
                f"{self.name}: {full[0]!r} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"
            )
        return result

    def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def read_file(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def open_tunnel(self, remote_port: int) -> AbstractContextManager[int]:
        return _no_tunnel(remote_port)

    def close(self) -> None:
        """Nothing to release for the local machine."""


@contextmanager
def _no_tunnel(port: int) -> Iterator[int]:
    # The port is already local: the "tunnel" is the identity.
    yield port
