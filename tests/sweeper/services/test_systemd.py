"""SystemdService on a real systemd (test hosts over SSH): units, restarts, failures, journals.

Needs root for the test hosts; skips with the reason elsewhere.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.engines.launch import Launch
from sweeper.hosts.ssh import SSHHost
from sweeper.hosts.ssh_target import SSHTarget
from sweeper.services import ServiceError
from sweeper.services.readiness import ReadinessError, wait_healthy
from sweeper.services.systemd import SystemdService, parse_show
from tests.testhosts import TestHost

PY = "/usr/bin/python3"
PWNED = '"; touch /tmp/pwned #'
ECHO_ARGV = "import json, os, sys, time; print(json.dumps(sys.argv[1:])); " + (
    "print('env', os.environ['NOTE'], os.environ['TOKEN'], flush=True); time.sleep(600)"
)
SLEEPER = "import time; print('loading forever', flush=True); time.sleep(600)"
BAD_FLAG = "import argparse; argparse.ArgumentParser().parse_args()"


@pytest.fixture
def service(host_a: SSHHost) -> Iterator[SystemdService]:
    svc = SystemdService(
        host_a, unit=f"sweeper-test-{uuid.uuid4().hex[:8]}", remote_root="/opt/sweeper-test"
    )
    yield svc
    svc.stop()
    svc.remove()


def launch(*argv: str, **kwargs: object) -> Launch:
    return Launch(argv=(PY, *argv), port=18500, launch_id=uuid.uuid4().hex[:12], **kwargs)  # type: ignore[arg-type]


def test_parse_show() -> None:
    status = parse_show(
        "ActiveState=failed\nSubState=failed\nMainPID=0\nInvocationID=abc\n"
        "ExecMainStatus=2\nNRestarts=0\nResult=exit-code\n"
    )
    assert (status.active_state, status.exec_main_status, status.result) == (
        "failed",
        2,
        "exit-code",
    )
    assert not status.running


def test_unit_passes_every_argument_literally(
    service: SystemdService, host_a: SSHHost, testhost_pair: list[TestHost]
) -> None:
    weird = [PWNED, "$HOME", "${PATH}", "%h", "a\\b", "it's", 'say "hi"', "two words"]
    service.start(
        launch("-c", ECHO_ARGV, *weird, env={"NOTE": "50% $off"}, secret_env={"TOKEN": "s3 $x"})
    )
    installed = host_a.read_file(service.unit_path).decode()
    assert installed == service.unit_text
    print(installed)  # the unit file, for the record (pytest -s)
    assert "Restart=no" in installed and "KillMode=control-group" in installed
    assert "s3 $x" not in installed  # the secret lives only in the EnvironmentFile
    assert host_a.run(["stat", "-c", "%a", service.secrets_path]).stdout.strip() == "600"
    deadline = time.monotonic() + 20
    while "env " not in (text := service.logs()[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    messages = [line.split("]: ", 1)[1] for line in text.splitlines() if "python3[" in line]
    assert json.loads(messages[0]) == weird
    assert "env 50% $off s3 $x" in text
    assert testhost_pair[0].exec(["test", "-e", "/tmp/pwned"]).returncode == 1


def test_restart_changes_invocation_id_and_main_pid(
    service: SystemdService, host_a: SSHHost
) -> None:
    first = service.start(launch("-c", SLEEPER))
    service.stop()
    assert not service.state().running
    assert not host_a.run(["test", "-d", f"/proc/{first.pid}"], check=False).ok
    second = service.start(launch("-c", SLEEPER))
    assert second.invocation_id and second.invocation_id != first.invocation_id
    assert second.pid and second.pid != first.pid
    status = service.show()
    assert (status.invocation_id, status.main_pid) == (second.invocation_id, second.pid)
    # A start over a still-running instance stops it first: a new invocation, never the old one.
    third = service.start(launch("-c", SLEEPER))
    assert third.invocation_id not in (first.invocation_id, second.invocation_id)
    assert not host_a.run(["test", "-d", f"/proc/{second.pid}"], check=False).ok


def test_unit_failing_at_start_ends_the_wait_at_once_with_the_journal_tail(
    service: SystemdService,
) -> None:
    # The unit dies within milliseconds: `start` itself may see it fail (ServiceError, the
    # journal in its message), else the readiness wait does; either way at once, with the tail.
    started = time.monotonic()
    with pytest.raises((ReadinessError, ServiceError), match="exited") as info:
        instance = service.start(launch("-c", BAD_FLAG, "--no-such-flag"))
        wait_healthy(
            service,
            f"http://{service.host.address}:{instance.launch.port}",
            300,
            log_tail=service.journal_tail,
        )
    assert time.monotonic() - started < 15  # not the 300 s deadline
    error = info.value
    tail = error.log_tail if isinstance(error, ReadinessError) else str(error)
    assert "unrecognized arguments: --no-such-flag" in tail
    state = service.state()
    assert state.exited and state.exit_code == 2


def test_unit_that_never_becomes_ready_times_out_with_the_journal_tail(
    service: SystemdService,
) -> None:
    instance = service.start(launch("-c", SLEEPER))
    with pytest.raises(ReadinessError, match="not ready after") as info:
        wait_healthy(
            service,
            f"http://{service.host.address}:{instance.launch.port}",
            2.0,
            log_tail=service.journal_tail,
        )
    assert "loading forever" in info.value.log_tail
    assert service.state().running


def test_journal_lines_by_cursor_belong_to_one_instance(service: SystemdService) -> None:
    service.start(launch("-c", "print('first instance', flush=True); import time; time.sleep(600)"))
    deadline = time.monotonic() + 20
    while "first instance" not in service.logs()[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    text, cursor = service.logs()
    assert "first instance" in text and cursor
    assert service.logs(cursor)[0] == ""  # nothing new since the cursor
    service.start(
        launch("-c", "print('second instance', flush=True); import time; time.sleep(600)")
    )
    while "second instance" not in service.logs()[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    second = service.logs()[0]
    assert "second instance" in second and "first instance" not in second


def test_stop_frees_the_port(service: SystemdService, host_a: SSHHost) -> None:
    server = (
        "import http.server as h; "
        "h.HTTPServer(('0.0.0.0', 18500), h.BaseHTTPRequestHandler).serve_forever()"
    )
    service.start(launch("-c", server))
    deadline = time.monotonic() + 20
    while not host_a.run(["ss", "-Hltn", "sport = :18500"]).stdout.strip():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    service.stop()
    assert not host_a.run(["ss", "-Hltn", "sport = :18500"]).stdout.strip()
    assert service.show().active_state == "inactive"


def _add_sudo_user(host: TestHost, name: str, sudo: bool) -> None:
    """A non-root login on the test host (in its overlay), with passwordless sudo or none."""
    script = (
        f"id {name} >/dev/null 2>&1 || useradd -m -s /bin/sh {name}; "
        f"install -d -m 700 -o {name} -g {name} /home/{name}/.ssh; "
        f"install -m 600 -o {name} -g {name} /root/.ssh/authorized_keys /home/{name}/.ssh/; "
        + (f"echo '{name} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{name}" if sudo else "true")
    )
    assert host.exec(["sh", "-c", script]).returncode == 0


def test_non_root_user_manages_the_unit_through_sudo(
    testhost_pair: list[TestHost], session_known_hosts: str
) -> None:
    if not Path("/usr/bin/sudo").exists():
        pytest.skip("sudo is not installed (run .ci/setup-system.sh)")
    host = testhost_pair[1]
    _add_sudo_user(host, "ops", sudo=True)
    target = SSHTarget(host.address, 22, "ops", (host.key_file,), None, session_known_hosts)
    ssh = SSHHost("ops", target, sudo_allowed=True)
    service = SystemdService(
        ssh, unit="sweeper-sudo-test", remote_root="/home/ops/ddtree", sudo=True
    )
    try:
        assert ssh.run(["id", "-un"]).stdout.strip() == "ops"
        instance = service.start(launch("-c", SLEEPER, secret_env={"TOKEN": "t"}))
        assert service.state().running and instance.pid
        assert "Restart=no" in host.exec(["cat", service.unit_path]).stdout
        mode = ssh.run(["stat", "-c", "%a %U", service.secrets_path]).stdout.split()
        assert mode == ["600", "ops"]
        service.stop()
        assert not service.state().running
    finally:
        service.stop()
        service.remove()
        ssh.close()
    # The same user without sudo rights: a clear error, nothing installed.
    _add_sudo_user(host, "nosudo", sudo=False)
    target = SSHTarget(host.address, 22, "nosudo", (host.key_file,), None, session_known_hosts)
    plain = SSHHost("nosudo", target, sudo_allowed=True)
    refused = SystemdService(plain, unit="sweeper-nosudo", remote_root="/home/nosudo/d", sudo=True)
    with pytest.raises(ServiceError, match="sudo"):
        refused.start(launch("-c", SLEEPER))
    assert host.exec(["test", "-e", "/etc/systemd/system/sweeper-nosudo.service"]).returncode == 1
    plain.close()
