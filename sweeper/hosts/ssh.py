"""A remote machine reached over SSH (paramiko) as a `Host`.

One connection per host, reused for every command, SFTP transfer and tunnel; keepalive on it, a
timeout on every command, and reconnection with backoff when it drops. Host keys are checked
strictly against known_hosts: an unknown or changed key stops with the command that fixes it, and
only the spec's `accept_new_host_key` accepts (and records) a key never seen before. Commands are
argv lists joined with `shlex.join`, so a spec value reaches the remote shell only quoted.
"""

from __future__ import annotations

import contextlib
import logging
import select
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import paramiko

from sweeper.hosts import CommandResult, HostError
from sweeper.hosts.ssh_target import (
    HostKeyError,
    PermanentHostError,
    RecordNewKey,
    SSHTarget,
    changed_key_message,
    permanent_reason,
    unknown_key_message,
)
from sweeper.hosts.ssh_tunnel import forwarded_port

# paramiko logs failures it also raises (e.g. a tunnel channel refused while the runtime is still
# loading); without a handler Python would print them to stderr mid-progress.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

#: Seconds between reconnection attempts after a drop (the last one repeats).
RECONNECT_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0)


class SSHHost:
    """A `Host` over one reused, keepalive'd paramiko connection; safe to share between threads."""

    def __init__(
        self,
        name: str,
        target: SSHTarget,
        *,
        accept_new_host_key: bool = False,
        connect_timeout: float = 15.0,
        keepalive_s: int = 15,
        sudo_allowed: bool = False,
    ) -> None:
        self.name = name
        self.target = target
        self.address = target.hostname
        self.accept_new_host_key = accept_new_host_key
        self.connect_timeout = connect_timeout
        self.keepalive_s = keepalive_s
        self.sudo_allowed = sudo_allowed
        self._lock = threading.RLock()
        self._client: paramiko.SSHClient | None = None
        self._jump: SSHHost | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._sftp_lock = threading.Lock()
        self._closed = False
        self._permanent: PermanentHostError | None = None
        #: How many times the connection was (re)established; tests and the bench read it.
        self.connects = 0

    # ------------------------------------------------------------------ connection

    def _transport(self) -> paramiko.Transport:
        """The live transport, connecting (with backoff) when there is none or it dropped."""
        with self._lock:
            if self._closed:
                raise HostError(f"{self.name}: host is closed")
            client = self._client
            transport = client.get_transport() if client else None
            if transport is not None and transport.is_active():
                return transport
            self._drop()
            if self._permanent is not None:  # it failed for good: no point asking again
                raise self._permanent
            last: Exception | None = None
            for delay in (0.0, *RECONNECT_BACKOFF_S):
                time.sleep(delay)
                try:
                    return self._connect()
                except HostKeyError:
                    raise
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    last = exc
                    if reason := permanent_reason(exc):
                        self._permanent = PermanentHostError(
                            f"{self.name}: cannot connect to {self.target.hostname}: {reason}"
                        )
                        raise self._permanent from None
            raise HostError(
                f"{self.name}: cannot connect to {self.target.user}@{self.target.hostname}:"
                f"{self.target.port} after {len(RECONNECT_BACKOFF_S) + 1} attempts: {last}"
            )

    def _connect(self) -> paramiko.Transport:
        t = self.target
        client = paramiko.SSHClient()
        if Path(t.known_hosts).exists():
            client.load_host_keys(t.known_hosts)
        policy = (
            RecordNewKey(t.known_hosts) if self.accept_new_host_key else paramiko.RejectPolicy()
        )
        client.set_missing_host_key_policy(policy)
        sock: socket.socket | paramiko.Channel
        if t.proxy_jump is None:
            sock = socket.create_connection((t.hostname, t.port), timeout=self.connect_timeout)
            # Small request/response packets: without NODELAY, Nagle + delayed ACK add ~40 ms.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            self._jump = SSHHost(
                f"{self.name}-jump", t.proxy_jump, connect_timeout=self.connect_timeout
            )
            sock = self._jump._transport().open_channel(
                "direct-tcpip", (t.hostname, t.port), ("127.0.0.1", 0)
            )
        try:
            client.connect(
                t.hostname,
                port=t.port,
                username=t.user,
                key_filename=list(t.key_files) or None,  # type: ignore[arg-type]
                allow_agent=True,  # ssh-agent keys work
                look_for_keys=not t.key_files,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                sock=sock,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(changed_key_message(self.name, t, exc.key)) from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(unknown_key_message(self.name, t)) from None
            raise
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(self.keepalive_s)
        self._client = client
        self.connects += 1
        return transport

    def _drop(self, lost: paramiko.Transport | None = None) -> None:
        """Close the connection; given the transport a command `lost`, only if that is still
        the one in use: threads share the connection, and one retrying must not close the
        fresh connection another thread has just made."""
        with self._lock:
            current = self._client.get_transport() if self._client else None
            if lost is not None and current is not lost:
                return
            for closable in (self._sftp, self._client, self._jump):
                try:
                    if closable is not None:
                        closable.close()
                except Exception:  # noqa: BLE001 - a dead connection may fail to close
                    pass
            self._sftp, self._client, self._jump = None, None, None

    def close(self) -> None:
        with self._lock:
            self._drop()
            self._closed = True

    # ------------------------------------------------------------------ commands

    def command_line(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, sudo: bool = False
    ) -> str:
        """The exact remote command line: every element quoted, env via `env K=V`."""
        parts: list[str] = []
        if sudo:
            if not self.sudo_allowed and self.target.user != "root":
                raise HostError(f"{self.name}: sudo is needed but the spec does not allow it")
            if self.target.user != "root":
                parts += ["sudo", "-n", "--"]
        if env:
            parts += ["env", *(f"{k}={v}" for k, v in env.items())]
        return shlex.join([*parts, *argv])

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        if not argv:
            raise HostError(f"{self.name}: empty command")
        line = self.command_line(argv, env, sudo)
        for attempt in (1, 2):
            try:
                exit_code, out, err = self._exec(line, timeout)
                break
            except _ConnectionLost as exc:
                # One retry on a fresh connection: the sweeper's commands are idempotent.
                if attempt == 2:
                    raise HostError(
                        f"{self.name}: connection lost running {argv[0]!r}: {exc}"
                    ) from None
                self._drop(exc.transport)
        result = CommandResult(tuple(argv), exit_code, out, err)
        if check and not result.ok:
            raise HostError(
                f"{self.name}: {shlex.join(argv)[:200]} exited {exit_code}: {err.strip()[-2000:]}"
            )
        return result

    def _exec(self, line: str, timeout: float | None) -> tuple[int, str, str]:
        transport = self._transport()
        try:
            channel = transport.open_session(timeout=self.connect_timeout)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise _ConnectionLost(repr(exc), transport) from None
        deadline = None if timeout is None else time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        try:
            # No stdin, and no channel EOF to say so: paramiko may send that EOF after the CLOSE
            # it answers a quick command's exit with (paramiko #1115, #1705), and OpenSSH then
            # drops the whole connection ("ieof packet referred to nonexistent channel").
            channel.exec_command(f"{line} </dev/null")
            while True:
                while channel.recv_ready():
                    out += channel.recv(65536)
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                if channel.exit_status_ready() or channel.closed:
                    break
                if not channel.get_transport() or not channel.get_transport().is_active():
                    raise _ConnectionLost("transport closed", transport)
                wait = 0.02 if deadline is None else min(0.02, deadline - time.monotonic())
                if wait <= 0:
                    raise HostError(
                        f"{self.name}: command timed out after {timeout} s: {line[:200]}"
                    )
                select.select([channel], [], [], wait)
            # exit-status comes after the data and EOF: drain what is left.
            channel.settimeout(10.0)
            with contextlib.suppress(TimeoutError):
                # The data came before the exit status; only the EOF may straggle on a loaded
                # host, and waiting for it is no reason to lose (and re-run) the command.
                while chunk := channel.recv(65536):
                    out += chunk
                while chunk := channel.recv_stderr(65536):
                    err += chunk
            if not channel.exit_status_ready():
                raise _ConnectionLost("channel closed without an exit status", transport)
            code = channel.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise _ConnectionLost(repr(exc), transport) from None
        finally:
            # Closing a channel sends a message: on a transport that just died that raises
            # too, and must not replace the _ConnectionLost that `run` retries on.
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                channel.close()
        if code == -1:
            raise _ConnectionLost("no exit status (killed session?)", transport)
        return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    # ------------------------------------------------------------------ files

    @contextmanager
    def _sftp_client(self) -> Iterator[paramiko.SFTPClient]:
        with self._sftp_lock:
            transport = self._transport()
            if self._sftp is None or self._sftp.get_channel().get_transport() is not transport:  # type: ignore[union-attr]
                self._sftp = paramiko.SFTPClient.from_transport(transport)
            assert self._sftp is not None
            yield self._sftp

    def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        parent, _, base = path.rpartition("/")
        tmp = f"{parent}/.{base}.{uuid.uuid4().hex[:8]}.tmp"
        for attempt in (1, 2):
            used: paramiko.Transport | None = None
            try:
                with self._sftp_client() as sftp:
                    used = sftp.get_channel().get_transport()  # type: ignore[union-attr]
                    _sftp_makedirs(sftp, parent or "/")
                    # Create with the final mode from the start: a secret is never world-readable.
                    with sftp.open(tmp, "wb") as fh:
                        fh.chmod(mode)
                        fh.write(data)
                    sftp.posix_rename(tmp, path)
                return
            except (EOFError, paramiko.SSHException, OSError) as exc:
                # An SFTP status error (permission, no such directory) carries an errno; a
                # dropped connection does not and is worth one retry on a fresh one.
                if (isinstance(exc, OSError) and exc.errno is not None) or attempt == 2:
                    raise HostError(f"{self.name}: cannot write {path}: {exc}") from None
                self._drop(used)

    def read_file(self, path: str) -> bytes:
        with self._sftp_client() as sftp:
            try:
                with sftp.open(path, "rb") as fh:
                    return fh.read()
            except FileNotFoundError:
                raise
            except OSError as exc:
                if getattr(exc, "errno", None) == 2:
                    raise FileNotFoundError(path) from None
                raise HostError(f"{self.name}: cannot read {path}: {exc}") from None

    # ------------------------------------------------------------------ tunnel

    def open_tunnel(
        self,
        remote_port: int,
        host: str = "127.0.0.1",
        abort: threading.Event | None = None,
    ) -> AbstractContextManager[int]:
        """Forward a free local port to `host:remote_port` as this SSH server reaches it (its own
        loopback by default; a cluster's compute node from its login host). Setting `abort`
        closes every forwarded connection at once: a client waiting on a machine that died
        (no RST ever comes) fails now instead of at its read timeout."""

        def open_channel(target: tuple[str, int], peer: tuple[str, int]) -> paramiko.Channel:
            # Bounded: a channel to a dead node would otherwise wait paramiko's hour.
            transport = self._transport()
            return transport.open_channel(
                "direct-tcpip", target, peer, timeout=self.connect_timeout
            )

        return forwarded_port(
            open_channel, f"tunnel-{self.name}", (host, remote_port), abort or threading.Event()
        )


class _ConnectionLost(Exception):
    """The SSH connection dropped under a command (internal: triggers one reconnect + retry).
    Its text is the cause's repr: paramiko raises EOFError() and timeouts with no message."""

    def __init__(self, reason: str, transport: paramiko.Transport) -> None:
        super().__init__(reason)
        #: The connection that was lost (the one to drop, if no thread has replaced it yet).
        self.transport = transport


def _sftp_makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    parts = [p for p in path.split("/") if p]
    current = ""
    for part in parts:
        current += "/" + part
        try:
            sftp.stat(current)
        except FileNotFoundError:
            sftp.mkdir(current)
