"""The runtime as a systemd unit on a (remote) host: the `Service` for SSH hosts.

Each start renders the unit from the `Launch` (see `unit.py`), installs it atomically, reloads
systemd and restarts the unit, then watches `systemctl show` until a NEW invocation is active
with a new MainPID and the previous MainPID is gone: only then is the instance handed to
readiness, which proves the rest (launch id, fingerprint, start time) over HTTP. A unit that
fails or exits during startup shows up in `state()` at once, so readiness stops waiting and
reports the journal tail. Journal lines are read by cursor, so each point gets exactly its own.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sweeper.engines.launch import Launch
from sweeper.hosts import Host, HostError
from sweeper.poll import WaitTimeout, wait_until
from sweeper.services import Instance, ServiceError, ServiceState
from sweeper.services.unit import UnitOptions, environment_file_text, render_unit

SHOW_PROPERTIES = (
    "ActiveState",
    "SubState",
    "MainPID",
    "InvocationID",
    "ExecMainStatus",
    "NRestarts",
    "Result",
)
JOURNAL_TAIL_LINES = 40
UNIT_DIR = "/etc/systemd/system"


@dataclass(frozen=True)
class UnitStatus:
    """One `systemctl show` snapshot of the unit."""

    active_state: str
    sub_state: str
    main_pid: int
    invocation_id: str
    exec_main_status: int
    n_restarts: int
    result: str

    @property
    def running(self) -> bool:
        return self.active_state in ("active", "activating", "reloading")

    def describe(self) -> str:
        return (
            f"ActiveState={self.active_state} SubState={self.sub_state} Result={self.result} "
            f"ExecMainStatus={self.exec_main_status} MainPID={self.main_pid}"
        )


def parse_show(text: str) -> UnitStatus:
    """Parse `systemctl show -p ...` output (KEY=VALUE lines)."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def number(key: str) -> int:
        try:
            return int(values.get(key, "0") or 0)
        except ValueError:
            return 0

    return UnitStatus(
        active_state=values.get("ActiveState", ""),
        sub_state=values.get("SubState", ""),
        main_pid=number("MainPID"),
        invocation_id=values.get("InvocationID", ""),
        exec_main_status=number("ExecMainStatus"),
        n_restarts=number("NRestarts"),
        result=values.get("Result", ""),
    )


class SystemdService:
    """Starts, watches and stops one runtime unit on `host`; one instance at a time."""

    def __init__(
        self,
        host: Host,
        *,
        unit: str = "ddtree-runtime",
        remote_root: str = "/opt/ddtree-sweeper",
        sudo: bool = False,
        extra_env: Mapping[str, str] | None = None,
        timeout_start_s: float = 900.0,
        timeout_stop_s: float = 15.0,
        activation_timeout_s: float = 30.0,
        prepare: Callable[[], object] | None = None,
    ) -> None:
        self.host = host
        self.unit = unit if unit.endswith(".service") else f"{unit}.service"
        self.remote_root = remote_root.rstrip("/")
        self.sudo = sudo
        self.extra_env = dict(extra_env or {})
        self.timeout_start_s = timeout_start_s
        self.timeout_stop_s = timeout_stop_s
        self.activation_timeout_s = activation_timeout_s
        #: Called once before the first start (deploying the bundle); its errors fail the start.
        self._prepare = prepare
        self._lock = threading.Lock()
        self._instance: Instance | None = None
        self._start_cursor: str | None = None
        #: The unit text last installed (tests and reports show it).
        self.unit_text = ""

    # ------------------------------------------------------------------ systemctl / journal

    @property
    def unit_path(self) -> str:
        return f"{UNIT_DIR}/{self.unit}"

    @property
    def secrets_path(self) -> str:
        return f"{self.remote_root}/secrets/{self.unit.removesuffix('.service')}.env"

    def _systemctl(self, *args: str, timeout: float = 60.0, check: bool = True) -> str:
        result = self.host.run(["systemctl", *args], timeout=timeout, check=check, sudo=self.sudo)
        return result.stdout

    def show(self) -> UnitStatus:
        """The unit's current ActiveState, SubState, MainPID, InvocationID, ... (one round trip)."""
        props = ",".join(SHOW_PROPERTIES)
        return parse_show(self._systemctl("show", self.unit, "-p", props, timeout=30.0))

    def journal_cursor(self) -> str | None:
        """The cursor of the newest journal entry on the host (any unit)."""
        out = self.host.run(
            ["journalctl", "-n", "1", "-q", "-o", "cat", "--no-pager", "--show-cursor"],
            timeout=30.0,
            check=False,
            sudo=self.sudo,
        ).stdout
        return _cursor_of(out)

    def journal(self, after: str | None, lines: int | None = None) -> tuple[str, str | None]:
        """This unit's journal after cursor `after` (all of it when None) and the last cursor."""
        argv = ["journalctl", "-u", self.unit, "-o", "short-precise", "--no-pager", "-q"]
        argv += ["--show-cursor"]
        if after:
            argv += ["--after-cursor", after]
        if lines is not None:
            argv += ["-n", str(lines)]
        out = self.host.run(argv, timeout=60.0, check=False, sudo=self.sudo).stdout
        cursor = _cursor_of(out)
        text = "\n".join(line for line in out.splitlines() if not line.startswith("-- cursor: "))
        return (text + "\n" if text else ""), cursor

    def journal_tail(self) -> str:
        """The last lines of this instance's journal (for failure reasons)."""
        text, _ = self.journal(self._start_cursor, lines=JOURNAL_TAIL_LINES)
        return text

    # ------------------------------------------------------------------ Service

    def start(self, launch: Launch) -> Instance:
        with self._lock:
            try:
                return self._start(launch)
            except ServiceError:
                raise
            except (RuntimeError, OSError) as exc:  # HostError, a failed bundle deploy
                raise ServiceError(f"{self.host.name}: cannot start {self.unit}: {exc}") from exc

    def _start(self, launch: Launch) -> Instance:
        if self._prepare is not None:
            self._prepare()
            self._prepare = None
        before = self.show()
        if before.running:
            self._stop(self.timeout_stop_s)
            before = self.show()
        self._start_cursor = self.journal_cursor()
        options = UnitOptions(
            description=f"DDTree runtime, sweeper launch {launch.launch_id}",
            environment_file=self.secrets_path if launch.secret_env else None,
            timeout_start_s=self.timeout_start_s,
            timeout_stop_s=self.timeout_stop_s,
        )
        if launch.secret_env:
            # 0600 from creation (put_file sets the mode before any byte is written).
            self.host.run(["mkdir", "-p", "-m", "0700", f"{self.remote_root}/secrets"])
            text = environment_file_text(launch.secret_env)
            self.host.put_file(self.secrets_path, text.encode(), mode=0o600)
        # The instance carries the environment the unit really gives (the bundle's PYTHONPATH
        # too), so the /proc proof checks all of it.
        merged = dataclasses.replace(launch, env={**self.extra_env, **launch.env})
        self.unit_text = render_unit(merged, options)
        self._install_unit(self.unit_text)
        self._systemctl("daemon-reload")
        restart = self.host.run(
            ["systemctl", "restart", self.unit], timeout=120.0, check=False, sudo=self.sudo
        )
        if not restart.ok:
            raise ServiceError(
                f"{self.host.name}: systemctl restart {self.unit} failed: "
                f"{restart.stderr.strip()}\n{self.journal_tail()}"
            )
        status = self._wait_new_invocation(before)
        instance = Instance(
            launch=merged,
            pid=status.main_pid or None,
            invocation_id=status.invocation_id,
        )
        self._instance = instance
        return instance

    def _install_unit(self, text: str) -> None:
        """Atomically replace the unit file (temp file + rename in the unit directory)."""
        if not self.sudo:
            self.host.put_file(self.unit_path, text.encode(), mode=0o644)
            return
        # Not root: stage the file where the user may write, then sudo-install and rename.
        staged = f"{self.remote_root}/units/{self.unit}"
        self.host.run(["mkdir", "-p", f"{self.remote_root}/units"])
        self.host.put_file(staged, text.encode(), mode=0o644)
        tmp = f"{UNIT_DIR}/.{self.unit}.tmp"
        self.host.run(["install", "-m", "0644", staged, tmp], sudo=True)
        self.host.run(["mv", "-f", tmp, self.unit_path], sudo=True)

    def _wait_new_invocation(self, before: UnitStatus) -> UnitStatus:
        """Until a new InvocationID is active with a new MainPID, and the old MainPID is gone."""
        last = before

        def started() -> UnitStatus | None:
            nonlocal last
            status = last = self.show()
            new = status.invocation_id and status.invocation_id != before.invocation_id
            if new and not status.running:
                raise ServiceError(
                    f"{self.host.name}: {self.unit} exited during startup ({status.describe()})\n"
                    f"{self.journal_tail()}"
                )
            fresh_pid = status.main_pid and status.main_pid != before.main_pid
            old_gone = not before.main_pid or not self._pid_alive(before.main_pid)
            return status if new and fresh_pid and old_gone else None

        try:
            return wait_until(started, timeout_s=self.activation_timeout_s).value
        except WaitTimeout:
            raise ServiceError(
                f"{self.host.name}: {self.unit} did not reach a new running invocation in "
                f"{self.activation_timeout_s:.0f} s ({last.describe()})\n"
                f"{self.journal_tail()}"
            ) from None

    def _pid_alive(self, pid: int) -> bool:
        return self.host.run(["test", "-d", f"/proc/{pid}"], check=False, timeout=30.0).ok

    def state(self) -> ServiceState:
        status = self.show()
        instance = self._instance
        ours = instance is None or status.invocation_id == instance.invocation_id
        if ours and status.running:
            return ServiceState(running=True, exited=False, detail=status.describe())
        return ServiceState(
            running=False,
            exited=True,
            exit_code=status.exec_main_status if ours else None,
            detail=status.describe() if ours else f"a different invocation: {status.describe()}",
        )

    def logs(self, cursor: str | None = None) -> tuple[str, str]:
        # Logs are evidence for a point, never a reason to lose it: an unreachable host gives a
        # note in place of the journal (the point's own reason says what failed).
        try:
            text, new_cursor = self.journal(cursor or self._start_cursor)
        except (HostError, OSError) as exc:
            return f"(journal unavailable: {exc})\n", cursor or ""
        return text, new_cursor or cursor or self._start_cursor or ""

    def stop(self, timeout: float = 15.0) -> None:
        with self._lock:
            try:
                self._stop(timeout)
            except ServiceError:
                raise
            except (RuntimeError, OSError) as exc:
                raise ServiceError(f"{self.host.name}: cannot stop {self.unit}: {exc}") from exc

    def _stop(self, timeout: float) -> None:
        # TimeoutStopSec in the unit makes systemd SIGKILL the whole control group after it.
        result = self.host.run(
            ["systemctl", "stop", self.unit],
            timeout=timeout + self.timeout_stop_s + 30.0,
            check=False,
            sudo=self.sudo,
        )
        if not result.ok and "not loaded" not in result.stderr:
            raise ServiceError(f"{self.host.name}: systemctl stop failed: {result.stderr.strip()}")
        status = self.show()
        if status.running:
            raise ServiceError(f"{self.host.name}: {self.unit} still running: {status.describe()}")
        self._systemctl("reset-failed", self.unit, check=False)
        if self._instance is not None:
            self._wait_port_free(self._instance.launch.port, timeout)

    def _wait_port_free(self, port: int, timeout: float) -> None:
        def free() -> bool:
            listening = self.host.run(
                ["ss", "-Hltn", f"sport = :{port}"], check=False, timeout=30.0
            )
            # No `ss` on the host counts as free: systemd already waited for the cgroup.
            return not listening.ok or not listening.stdout.strip()

        try:
            wait_until(free, timeout_s=timeout, interval_s=0.1)
        except WaitTimeout:
            raise ServiceError(f"{self.host.name}: port {port} still in use after stop") from None

    def remove(self) -> None:
        """Delete the unit file and the secrets file (after `stop`)."""
        self.host.run(["rm", "-f", self.unit_path, self.secrets_path], sudo=self.sudo)
        self._systemctl("daemon-reload")


def _cursor_of(output: str) -> str | None:
    for line in reversed(output.splitlines()):
        if line.startswith("-- cursor: "):
            return line.removeprefix("-- cursor: ").strip()
    return None
