"""`sweeper doctor` against the test hosts: a table of checks, exit 1 when one fails.

Root only (test hosts). The selftest check needs the runtime's `selftest` command.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.exit_codes import EXIT_CHECK_FAILED
from sweeper.hosts.ssh import SSHHost
from tests.sweeper.testhost_fixture import hosts_yaml
from tests.testhosts import TestHost

WORKLOAD = "workload:\n  prompts:\n    - id: p\n      text: hi\n"


def _spec(tmp_path: Path, hosts: list[TestHost], known_hosts: str, port: int) -> Path:
    path = tmp_path / "doctor.yaml"
    path.write_text(
        f"name: doctor\n{hosts_yaml(hosts, known_hosts)}"
        f"runtime:\n  model: tiny-random\n  port: {port}\n{WORKLOAD}"
    )
    return path


def _rows(output: str) -> dict[tuple[str, str], str]:
    """(host, check) -> 'ok' | 'fail' from the rendered table."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) >= 5 and cells[3] in ("ok", "fail"):
            rows[(cells[1], cells[2])] = cells[3]
    return rows


def test_doctor_checks_every_host(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, testhost_pair, session_known_hosts, 18600)
    result = CliRunner().invoke(app, ["doctor", str(spec), "--no-selftest"])
    rows = _rows(result.output)
    for host in testhost_pair:
        for check in ("connectivity", "systemd", "python", "gpus", "disk", "port", "lease"):
            assert rows.get((host.name, check)) == "ok", result.output
    assert result.exit_code == 0, result.output
    assert "torch 2." in result.output and "transformers" in result.output


def test_doctor_fails_on_a_busy_port_and_an_unknown_host_key(
    testhost_pair: list[TestHost], host_a: SSHHost, tmp_path: Path
) -> None:
    first, second = testhost_pair
    known = tmp_path / "known_hosts"
    known.write_text(f"{first.address} {first.host_key_line}\n")  # the second host is unknown
    port = 18700
    unit = f"doctor-busy-{uuid.uuid4().hex[:6]}"
    host_a.run(["systemd-run", f"--unit={unit}", "python3", "-m", "http.server", str(port)])
    try:
        spec = _spec(tmp_path, testhost_pair, str(known), port)
        deadline = time.monotonic() + 30
        while not host_a.run(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip():
            assert time.monotonic() < deadline, "the busy-port server never listened"
            time.sleep(0.1)
        result = CliRunner().invoke(app, ["doctor", str(spec), "--no-selftest"])
    finally:
        host_a.run(["systemctl", "stop", unit], check=False)
    rows = _rows(result.output)
    assert result.exit_code == EXIT_CHECK_FAILED
    assert rows[(first.name, "port")] == "fail"
    assert rows[(first.name, "connectivity")] == "ok"
    assert rows[(second.name, "connectivity")] == "fail"
    assert "ssh-keyscan" in result.output


def test_doctor_runs_the_runtime_selftest_on_the_host(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, testhost_pair[:1], session_known_hosts, 18601)
    result = CliRunner().invoke(app, ["doctor", str(spec)])
    rows = _rows(result.output)
    assert rows[(testhost_pair[0].name, "selftest")] == "ok", result.output
    assert result.exit_code == 0, result.output
