"""SSHHost against real sshd test hosts: commands, quoting, files, host keys, drops, tunnels.

Needs root (the test hosts); skips with the reason elsewhere. The pure parts (command lines,
~/.ssh/config resolution) run everywhere.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import paramiko
import pytest

from sweeper.hosts import HostError
from sweeper.hosts.ssh import SSHHost
from sweeper.hosts.ssh_target import HostKeyError, PermanentHostError, SSHTarget, resolve_target
from tests.sweeper.testhost_fixture import ssh_host
from tests.testhosts import TestHost

PWNED = '"; touch /tmp/pwned #'


# --------------------------------------------------------------------------- pure


def test_command_line_quotes_every_element() -> None:
    host = SSHHost("h", SSHTarget("192.0.2.1", user="ops"), sudo_allowed=True)
    line = host.command_line(["echo", PWNED, "$HOME"], env={"A": "x y"}, sudo=True)
    assert line == "sudo -n -- env 'A=x y' echo '\"; touch /tmp/pwned #' '$HOME'"


def test_sudo_refused_unless_allowed_for_non_root() -> None:
    host = SSHHost("h", SSHTarget("192.0.2.1", user="ops"))
    with pytest.raises(HostError, match="does not allow"):
        host.command_line(["systemctl", "daemon-reload"], sudo=True)
    root = SSHHost("h", SSHTarget("192.0.2.1", user="root"))
    assert root.command_line(["true"], sudo=True) == "true"


def _backoff_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The reconnection delays SSHHost sleeps (recorded, not slept)."""
    slept: list[float] = []
    monkeypatch.setattr("sweeper.hosts.ssh.time.sleep", lambda s: slept.append(s) if s else None)
    return slept


def test_a_name_that_does_not_resolve_fails_at_once_and_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept = _backoff_sleeps(monkeypatch)
    host = SSHHost("gpu", SSHTarget("no-such-host.invalid", user="ops"))
    with pytest.raises(PermanentHostError, match="does not resolve"):
        host.run(["true"])
    assert slept == []  # no reconnection backoff for an error a retry cannot fix
    # The next point asks again: the answer is the same, without another lookup.
    monkeypatch.setattr("sweeper.hosts.ssh.socket.create_connection", pytest.fail)
    with pytest.raises(PermanentHostError, match="does not resolve"):
        host.run(["true"])


def test_resolve_alias_through_ssh_config(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host gpu1\n  HostName 10.9.8.7\n  User ops\n  Port 2222\n  IdentityFile ~/keys/gpu\n"
        "  ProxyJump jumper@bastion:2200\n"
        "Host bastion\n  HostName 192.0.2.10\n  IdentityFile /k/bastion\n"
    )
    target = resolve_target("gpu1", ssh_config=str(config), known_hosts="/kh")
    assert (target.hostname, target.port, target.user) == ("10.9.8.7", 2222, "ops")
    assert target.key_files == (str(Path("~/keys/gpu").expanduser()),)
    assert target.known_hosts == "/kh"
    jump = target.proxy_jump
    assert jump is not None
    assert (jump.hostname, jump.port, jump.user, jump.key_files) == (
        "192.0.2.10",
        2200,
        "jumper",
        ("/k/bastion",),
    )
    # explicit spec values win over the config file
    explicit = resolve_target("gpu1", port=22, user="root", ssh_config=str(config))
    assert (explicit.port, explicit.user) == (22, "root")


# --------------------------------------------------------------------------- real sshd


def test_run_reuses_one_connection_and_surfaces_stderr(host_a: SSHHost) -> None:
    assert host_a.run(["echo", "hello"]).stdout == "hello\n"
    result = host_a.run(["sh", "-c", "echo oops >&2; exit 3"], check=False)
    assert (result.exit_code, result.stderr) == (3, "oops\n")
    with pytest.raises(HostError, match="exited 3: oops"):
        host_a.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert host_a.connects == 1


def test_shell_metacharacters_reach_the_command_literally(
    host_a: SSHHost, testhost_pair: list[TestHost]
) -> None:
    values = [PWNED, "$(touch /tmp/pwned)", "`touch /tmp/pwned`", "a'b\"c\\d", "x\ny", "*"]
    for value in values:
        assert host_a.run(["printf", "%s", value]).stdout == value
    assert host_a.run(["printenv", "V"], env={"V": PWNED}).stdout == PWNED + "\n"
    assert not (testhost_pair[0].root / "tmp/pwned").exists()
    assert testhost_pair[0].exec(["test", "-e", "/tmp/pwned"]).returncode == 1


def test_command_timeout_keeps_the_connection(host_a: SSHHost) -> None:
    started = time.monotonic()
    with pytest.raises(HostError, match="timed out"):
        host_a.run(["sleep", "30"], timeout=0.5)
    assert time.monotonic() - started < 5
    assert host_a.run(["true"]).ok
    assert host_a.connects == 1


def test_put_file_is_atomic_with_mode_and_read_back(host_a: SSHHost) -> None:
    path = f"/opt/sweeper-test/{uuid.uuid4().hex}/secret.env"
    host_a.put_file(path, b"TOKEN=1\n", mode=0o600)
    assert host_a.read_file(path) == b"TOKEN=1\n"
    assert host_a.run(["stat", "-c", "%a", path]).stdout.strip() == "600"
    host_a.put_file(path, b"TOKEN=2\n", mode=0o600)
    assert host_a.read_file(path) == b"TOKEN=2\n"
    leftovers = host_a.run(["ls", "-A", path.rsplit("/", 1)[0]]).stdout.split()
    assert leftovers == ["secret.env"]  # no temp files left
    with pytest.raises(FileNotFoundError):
        host_a.read_file(path + ".missing")


def test_unknown_host_key_is_refused(testhost_pair: list[TestHost], tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = ssh_host(testhost_pair[0], str(empty))
    with pytest.raises(HostKeyError, match="ssh-keyscan") as info:
        host.run(["touch", "/tmp/should-not-exist"])
    assert "accept_new_host_key" in str(info.value)
    assert not (testhost_pair[0].root / "tmp/should-not-exist").exists()
    assert empty.read_text() == ""


def test_a_refused_key_fails_at_once(
    testhost_pair: list[TestHost], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    slept = _backoff_sleeps(monkeypatch)
    first = testhost_pair[0]
    target = SSHTarget(
        first.address,
        port=first.port,
        user=first.user,
        key_files=(str(stranger),),
        known_hosts=first.known_hosts,
    )
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "no-agent"))
    with pytest.raises(PermanentHostError, match="authentication failed"):
        SSHHost(first.name, target).run(["true"])
    assert slept == []


def test_changed_host_key_is_refused(testhost_pair: list[TestHost], tmp_path: Path) -> None:
    first, second = testhost_pair
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{first.address} {second.host_key_line}\n")  # another host's key
    host = ssh_host(first, str(wrong), accept_new_host_key=True)  # the flag never overrides this
    with pytest.raises(HostKeyError, match="CHANGED"):
        host.run(["true"])


def test_accept_new_host_key_records_it(testhost_pair: list[TestHost], tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    host = ssh_host(testhost_pair[0], str(known), accept_new_host_key=True)
    assert host.run(["hostname"]).stdout.strip() == testhost_pair[0].name
    host.close()
    assert testhost_pair[0].host_key_line in known.read_text()
    strict = ssh_host(testhost_pair[0], str(known))  # now known: strict checking passes
    assert strict.run(["true"]).ok
    strict.close()


def _sshd_session_pids(host: TestHost) -> list[str]:
    """PIDs of sshd's per-connection processes (children of the listening sshd)."""
    listener = host.exec(["systemctl", "show", "-p", "MainPID", "--value", "ssh.service"])
    parent = listener.stdout.strip()
    assert parent not in ("", "0"), "sshd is not running"
    children = host.exec(["ps", "-o", "pid=", "--ppid", parent]).stdout.split()
    return children


def test_reconnects_after_the_connection_drops(
    host_a: SSHHost, testhost_pair: list[TestHost]
) -> None:
    assert host_a.run(["true"]).ok
    sessions = _sshd_session_pids(testhost_pair[0])
    assert sessions
    for pid in sessions:
        testhost_pair[0].exec(["kill", "-9", pid])
    assert host_a.run(["echo", "back"]).stdout == "back\n"
    assert host_a.connects == 2


def test_a_connection_lost_mid_command_is_retried_even_where_closing_its_channel_fails(
    host_a: SSHHost, testhost_pair: list[TestHost], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session dies while a command runs; closing the dead channel raises (it sends a
    message on the dead transport: paramiko raises EOFError when the close wins the race with
    its reader thread, forced here); the command still runs again on a fresh connection."""
    close = paramiko.Channel.close

    def close_on_a_dead_transport(channel: paramiko.Channel) -> None:
        transport = channel.get_transport()
        if transport is None or not transport.is_active():
            raise EOFError()
        close(channel)

    monkeypatch.setattr(paramiko.Channel, "close", close_on_a_dead_transport)
    assert host_a.run(["true"]).ok
    sessions = _sshd_session_pids(testhost_pair[0])
    killer = threading.Timer(
        1.0, lambda: [testhost_pair[0].exec(["kill", "-9", pid]) for pid in sessions]
    )
    killer.start()
    try:
        assert host_a.run(["sh", "-c", "sleep 3; echo done"]).stdout == "done\n"
    finally:
        killer.join()
    assert host_a.connects == 2


def test_reconnects_with_backoff_while_sshd_is_down(
    host_a: SSHHost, testhost_pair: list[TestHost]
) -> None:
    host = testhost_pair[0]
    assert host_a.run(["true"]).ok
    sessions = _sshd_session_pids(host)  # before the stop: then the listener has no pid
    assert sessions
    assert host.exec(["systemctl", "stop", "ssh.service"]).returncode == 0
    for pid in sessions:  # ssh.service leaves sessions running (KillMode=process)
        host.exec(["kill", "-9", pid])
    restart = threading.Timer(1.5, lambda: host.exec(["systemctl", "start", "ssh.service"]))
    restart.start()
    try:
        started = time.monotonic()
        assert host_a.run(["echo", "back"]).stdout == "back\n"
        assert time.monotonic() - started >= 1.0  # waited through the backoff, then got in
        assert host_a.connects == 2
    finally:
        restart.join()
        host.exec(["systemctl", "start", "ssh.service"])


def test_threads_share_one_connection(host_a: SSHHost) -> None:
    results: list[str] = []

    def work(i: int) -> None:
        results.append(host_a.run(["echo", str(i)]).stdout.strip())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results, key=int) == [str(i) for i in range(8)]
    assert host_a.connects == 1


def test_threads_that_lose_the_connection_together_reconnect_once(
    host_a: SSHHost, testhost_pair: list[TestHost]
) -> None:
    """Every thread's command dies with the connection; each retries, and none closes the
    fresh connection another thread has made meanwhile."""
    assert host_a.run(["true"]).ok
    sessions = _sshd_session_pids(testhost_pair[0])
    results: list[str] = []

    def work(i: int) -> None:
        results.append(host_a.run(["sh", "-c", f"sleep 2; echo {i}"]).stdout.strip())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    for pid in sessions:
        testhost_pair[0].exec(["kill", "-9", pid])
    for t in threads:
        t.join(30)
    assert sorted(results, key=int) == [str(i) for i in range(8)]
    assert host_a.connects == 2


def test_a_quick_command_exiting_before_the_client_says_eof_keeps_the_connection(
    host_a: SSHHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving that loaded hosts hit: the command exits and its channel closes before
    the client thread gets to send the channel's EOF. OpenSSH drops the whole connection on an
    EOF for a closed channel, so the client must never send one (stdin is /dev/null instead)."""

    def shutdown_after_the_channel_closed(channel: paramiko.Channel, how: int) -> None:
        # paramiko's own steps (build the EOF under the channel lock, send it after), with the
        # thread descheduled in between until the command's exit has closed the channel.
        with channel.lock:
            eof = channel._send_eof()  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while not channel.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        if eof is not None:
            channel.transport._send_user_message(eof)  # type: ignore[union-attr]

    monkeypatch.setattr(paramiko.Channel, "shutdown", shutdown_after_the_channel_closed)
    for i in range(3):
        assert host_a.run(["echo", str(i)]).stdout == f"{i}\n"
    assert host_a.run(["cat"]).stdout == ""  # stdin is empty, not left open
    assert host_a.connects == 1


def test_tunnel_reaches_a_loopback_port_on_the_host(host_a: SSHHost) -> None:
    unit = f"sweeper-tunnel-{uuid.uuid4().hex[:8]}"
    port = 18000 + uuid.uuid4().int % 1000
    host_a.run(["mkdir", "-p", "/tmp/www"])
    host_a.put_file("/tmp/www/hello.txt", b"through the tunnel\n")
    host_a.run(
        ["systemd-run", f"--unit={unit}", "--working-directory=/tmp/www"]
        + ["python3", "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    )
    try:
        with host_a.open_tunnel(port) as local_port:
            deadline = time.monotonic() + 20
            while True:
                try:
                    resp = httpx.get(f"http://127.0.0.1:{local_port}/hello.txt", timeout=2)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            assert resp.text == "through the tunnel\n"
    finally:
        host_a.run(["systemctl", "stop", unit], check=False)


def test_proxy_jump_through_a_bastion(testhost_pair: list[TestHost], tmp_path: Path) -> None:
    """ProxyJump via host A to A's own sshd on its loopback (the hosts have no route between)."""
    first = testhost_pair[0]
    known = tmp_path / "known_hosts"
    known.write_text(f"{first.address} {first.host_key_line}\nlocalhost {first.host_key_line}\n")
    config = tmp_path / "config"
    config.write_text(
        f"Host inner\n  HostName localhost\n  User root\n  IdentityFile {first.key_file}\n"
        f"  ProxyJump bastion\nHost bastion\n  HostName {first.address}\n  User root\n"
        f"  IdentityFile {first.key_file}\n"
    )
    target = resolve_target("inner", ssh_config=str(config), known_hosts=str(known))
    host = SSHHost("inner", target)
    try:
        assert host.run(["hostname"]).stdout.strip() == first.name
        who = host.run(["sh", "-c", "echo $SSH_CONNECTION"]).stdout.split()
        assert who[0] == "127.0.0.1"  # the inner login came from the bastion itself
    finally:
        host.close()


def test_ssh_agent_keys_are_used(
    testhost_pair: list[TestHost],
    session_known_hosts: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key file given: the key comes from an ssh-agent (our own, on a private socket)."""
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if socket_path.exists():
                break
            time.sleep(0.05)
        env = {"SSH_AUTH_SOCK": str(socket_path), "PATH": "/usr/bin:/bin"}
        subprocess.run(["ssh-add", "-q", testhost_pair[0].key_file], env=env, check=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh keys to fall back on
        target = SSHTarget(testhost_pair[0].address, 22, "root", (), None, session_known_hosts)
        host = SSHHost("agent", target)
        assert host.run(["hostname"]).stdout.strip() == testhost_pair[0].name
        host.close()
    finally:
        agent.terminate()
        agent.wait(10)
