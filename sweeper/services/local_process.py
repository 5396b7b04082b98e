"""The runtime as a managed local process: own process group, a log file, a pidfile.

Stopping signals the whole process group (SIGTERM, then SIGKILL after a timeout) and waits until
the group is gone and the port is free, so the next config never races the previous one. Nothing
is ever killed by name: only the group this service started, or one its pidfile recorded (checked
against the process start time, so a recycled pid is left alone).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sweeper.engines.launch import Launch
from sweeper.hosts.local import process_start_ticks
from sweeper.poll import WaitTimeout, wait_until
from sweeper.services import Instance, ServiceError, ServiceState
from sweeper.statefile import PIDFILE, UnsafeStateFile, read_state


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts connections on, or holds a listening bind of, host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        if probe.connect_ex((host, port)) == 0:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR so a closed server's TIME_WAIT sockets do not count as "in use".
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def wait_port_free(port: int, timeout: float, host: str = "127.0.0.1") -> bool:
    """Poll until the port is free; False if it is still in use after `timeout` seconds."""
    try:
        wait_until(lambda: not port_in_use(port, host), timeout_s=timeout)
    except WaitTimeout:
        return False
    return True


def _wait_group_gone(pgid: int, timeout: float) -> bool:
    """Poll until no process of the group is left; False if some still is after `timeout`."""
    try:
        wait_until(lambda: not _group_alive(pgid), timeout_s=timeout, interval_s=0.02)
    except WaitTimeout:
        return False
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProcessService:
    """Starts the runtime as a child process in its own session, one instance at a time."""

    def __init__(
        self,
        state_dir: Path,
        *,
        name: str = "runtime",
        port_wait_s: float = 10.0,
        extra_env: Mapping[str, str] | None = None,
        prepare: Callable[[], object] | None = None,
    ):
        self.state_dir = Path(state_dir)
        #: Run once before the first start (an engine's checkout); its failure fails the start.
        self._prepare = prepare
        #: Environment every launch gets beneath its own (as a systemd unit's extra env).
        self.extra_env = dict(extra_env or {})
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.port_wait_s = port_wait_s
        self.pidfile = self.state_dir / f"{name}.pid"
        self._proc: subprocess.Popen[bytes] | None = None
        self._launch: Launch | None = None
        self._log_path: Path | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, launch: Launch) -> Instance:
        if self._proc is not None and self._proc.poll() is None:
            raise ServiceError("the previous instance is still running; stop it first")
        self._proc, self._launch, self._log_path = None, None, None  # forget the previous one
        if self._prepare is not None:
            try:
                self._prepare()
            except (RuntimeError, OSError) as exc:
                raise ServiceError(f"cannot start: {exc}") from exc
            self._prepare = None
        # The instance runs (and /proc must show) the service's environment under the launch's.
        launch = dataclasses.replace(launch, env={**self.extra_env, **launch.env})
        self.reap_stale()
        if not wait_port_free(launch.port, self.port_wait_s):
            raise ServiceError(
                f"port {launch.port} is still in use after {self.port_wait_s:.0f} s "
                "(a lingering previous instance or another program); not starting"
            )
        self._log_path = self.state_dir / f"{self.name}-{launch.launch_id}.log"
        env = {**os.environ, **launch.env, **launch.secret_env}
        with open(self._log_path, "ab") as log:
            try:
                self._proc = subprocess.Popen(
                    list(launch.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=launch.workdir,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServiceError(f"cannot start {launch.argv[0]!r}: {exc}") from exc
        self._launch = launch
        pid = self._proc.pid
        record = {
            "pid": pid,
            "start_ticks": process_start_ticks(pid),
            "launch_id": launch.launch_id,
        }
        tmp = self.pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.pidfile)
        return Instance(launch=launch, pid=pid)

    def state(self) -> ServiceState:
        if self._proc is None:
            return ServiceState(running=False, exited=False, detail="never started")
        code = self._proc.poll()
        if code is None:
            return ServiceState(running=True, exited=False, detail=f"pid {self._proc.pid}")
        return ServiceState(running=False, exited=True, exit_code=code, detail=f"exited {code}")

    def logs(self, cursor: str | None = None) -> tuple[str, str]:
        if self._log_path is None or not self._log_path.exists():
            return "", cursor or "0"
        offset = int(cursor) if cursor else 0
        with open(self._log_path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
        return data.decode("utf-8", "replace"), str(offset + len(data))

    def stop(self, timeout: float = 15.0) -> None:
        proc = self._proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        _signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            proc.wait(timeout=10)
        # Children of the runtime (if any) share the group: wait for all of them.
        if not _wait_group_gone(pgid, timeout):
            _signal_group(pgid, signal.SIGKILL)
        if self._launch is not None and not wait_port_free(self._launch.port, timeout):
            raise ServiceError(f"port {self._launch.port} still in use after stopping")
        self.pidfile.unlink(missing_ok=True)

    def reap_stale(self, timeout: float = 15.0) -> bool:
        """Stop an instance recorded in the pidfile by an earlier sweeper (e.g. killed -9);
        True when one was found and stopped (`reap_pidfile`)."""
        mine = self._proc.pid if self._proc is not None else None
        return reap_pidfile(self.pidfile, timeout, keep=mine)


#: Linux's largest pid (PID_MAX_LIMIT): a pidfile naming a larger one is damaged.
PID_MAX = 4_194_304


class PidRecord(BaseModel):
    """A pidfile's content (strict: a pid is a JSON integer, never a coerced reading)."""

    model_config = ConfigDict(strict=True)

    pid: int = Field(gt=1, le=PID_MAX)
    #: The process's start in clock ticks since boot (None: it was gone before it was read).
    start_ticks: int | None
    launch_id: str = ""


def read_pidfile(pidfile: Path) -> PidRecord | None:
    """The process a pidfile records, None when there is no pidfile; ServiceError (one line
    naming the file) when it holds no record, so nothing is ever signalled on a guess."""
    path = Path(pidfile)
    try:
        data = read_state(path, PIDFILE)
    except FileNotFoundError:
        return None
    except UnsafeStateFile as exc:
        raise ServiceError(f"the pidfile {path} {exc.strerror}") from None
    except OSError as exc:
        raise ServiceError(f"the pidfile {path} cannot be read ({exc})") from None
    try:
        return PidRecord.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        said = f"{where}: {first['msg']}" if where else first["msg"]
        shown = data[:60].decode("utf-8", "replace")
        raise ServiceError(
            f"the pidfile {path} holds no process record ({said}: {shown!r}); stop the server "
            "it was for by hand if one still runs, then remove the pidfile"
        ) from None


def reap_pidfile(pidfile: Path, timeout: float = 15.0, keep: int | None = None) -> bool:
    """Stop the instance a `ProcessService` pidfile records (an earlier sweeper's, killed -9,
    or a dead run whose host lease is taken over), with its group, and remove the pidfile.

    Only the exact process recorded (same pid and start time) is signalled, never `keep`.
    Returns True when one was found and stopped; ServiceError when the pidfile is damaged
    (`read_pidfile`: it is left as it is).
    """
    record = read_pidfile(pidfile)
    if record is None or record.pid == keep:
        return False
    pid = record.pid
    if record.start_ticks is None or process_start_ticks(pid) != record.start_ticks:
        Path(pidfile).unlink(missing_ok=True)
        return False
    _signal_group(pid, signal.SIGTERM)
    if not _wait_group_gone(pid, timeout):
        _signal_group(pid, signal.SIGKILL)
        _wait_group_gone(pid, 5.0)
    Path(pidfile).unlink(missing_ok=True)
    return True
