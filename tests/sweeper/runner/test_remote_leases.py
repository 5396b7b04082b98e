"""Two `sweeper run`s of different specs aimed at the same two SSH + systemd test hosts (same port),
through the real CLI with the fake runtime: each host's lease lies on the host itself; the second
run refuses naming the first, then waits for it; after the first is killed with SIGKILL (its
systemd units left running) the second takes both leases over with one line each, stops the
first's units, and no point of either run fails. Root only (test hosts)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.exit_codes import EXIT_CHECK_FAILED
from sweeper.results.reader import POINTS_LOG
from tests.sweeper.doctor.test_checks import _rows
from tests.sweeper.runner.test_remote_sweep import FAKE_DIR, _install_shim, _workload, _write_spec
from tests.sweeper.sweep_fixtures import shim_env
from tests.sweeper.testhost_fixture import hosts_yaml
from tests.testhosts import TestHost

pytestmark = pytest.mark.slow


def _sweeper(spec: Path, results: Path, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)]
    return [*argv, "--plain", *extra]


def _spec(tmp: Path, name: str, hosts: str, topk: list[int], max_tokens: int) -> Path:
    return _write_spec(
        tmp,
        name,
        hosts,
        {
            "runtime": {
                "model": "fake",
                "port": 18330,
                "ready_timeout_s": 30,
                "env": {**shim_env(FAKE_DIR), "FAKE_TOKEN_DELAY": "0.08"},
            },
            "grid": {"budget": [8], "topk": topk, "block_size": [4], "cuda_graph": [False]},
            "baseline": True,
            "workload": _workload(prompts=2, max_tokens=max_tokens),
        },
    )


def _frozen_serving(
    first: subprocess.Popen[str], hosts: list[TestHost], unit: str, deadline_s: float
) -> list[TestHost]:
    """Freeze `first` (SIGSTOP) while its `unit` is active on some host and return the hosts
    where it is active then. Frozen, the sweeper changes no unit, so what is read after its
    in-flight remote commands settle is what a take-over finds once it is killed; a freeze that
    caught every unit between a stop and a start is thawed and tried again."""
    deadline = time.monotonic() + deadline_s

    def active() -> list[TestHost]:
        return [
            h for h in hosts if h.exec(["systemctl", "is-active", unit]).stdout.strip() == "active"
        ]

    while True:
        assert time.monotonic() < deadline, f"{unit} was never active while its sweeper was frozen"
        assert first.poll() is None, "alpha ended before it could be killed mid-run"
        if not active():
            time.sleep(0.05)
            continue
        first.send_signal(signal.SIGSTOP)
        time.sleep(2.0)  # a `systemctl` already sent runs to its end on the host
        settled = active()
        time.sleep(0.5)
        if settled and [h.name for h in active()] == [h.name for h in settled]:
            return settled
        first.send_signal(signal.SIGCONT)


def test_two_specs_on_two_ssh_hosts_refuse_wait_and_take_over(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    for host in testhost_pair:
        _install_shim(host, session_known_hosts, None)
    hosts = hosts_yaml(testhost_pair, session_known_hosts, access="tunnel")
    # Alpha's plan (9 configs of 2.6 s requests: minutes) outlasts the ~20 s beta takes to be
    # refused, checked by `doctor` and start waiting, several times over on a loaded host, so
    # alpha is killed mid-plan rather than in its end-of-run work.
    alpha = _spec(tmp_path, "leasealpha", hosts, [1, 2, 3, 4, 5, 6, 7, 8], max_tokens=32)
    beta = _spec(tmp_path, "leasebeta", hosts, [2], max_tokens=4)
    results = tmp_path / "results"
    first = subprocess.Popen(
        _sweeper(alpha, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = tmp_path / "beta.stderr"
    try:
        deadline = time.monotonic() + 180
        while not any(results.glob(f"leasealpha/*/{POINTS_LOG}")):
            assert time.monotonic() < deadline and first.poll() is None, "alpha recorded nothing"
            time.sleep(0.1)
        run_alpha = next(results.glob(f"leasealpha/*/{POINTS_LOG}")).parent
        for host in testhost_pair:  # the lease lies on the host, naming the run
            text = host.exec(["cat", "/opt/ddtree-sweeper/lease.json"]).stdout
            holder = json.loads(text)
            assert (holder["sweep"], holder["run_id"], holder["pid"]) == (
                "leasealpha",
                run_alpha.name,
                first.pid,
            )
            assert holder["server"]["unit"] == "ddtree-leasealpha.service"

        refused = subprocess.run(_sweeper(beta, results), capture_output=True, text=True)
        assert refused.returncode == 75, refused.stderr
        said = refused.stderr.strip().splitlines()
        assert len(said) == 1 and "is leased to sweep 'leasealpha' run " in said[0], said
        # `doctor` reads each host's lease: held, so the check fails naming the holder.
        doctor = CliRunner().invoke(app, ["doctor", str(beta), "--no-selftest"])
        assert doctor.exit_code == EXIT_CHECK_FAILED, doctor.output
        rows = _rows(doctor.output)
        assert [rows[(h.name, "lease")] for h in testhost_pair] == ["fail", "fail"], doctor.output
        assert "held by sweep 'leasealpha'" in doctor.output

        with log.open("w") as err:
            second = subprocess.Popen(
                _sweeper(beta, results, "--wait-for-hosts", "300"),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        deadline = time.monotonic() + 60
        while "waiting for host" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        # Killed while its unit serves on some host (not between one config's stop and the
        # next one's start), so a take-over has a server of alpha's to stop.
        serving = _frozen_serving(first, testhost_pair, "ddtree-leasealpha", deadline_s=60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
    out, _ = second.communicate(timeout=300)
    stderr = log.read_text()
    assert second.returncode == 0, stderr[-3000:]
    took = [line for line in stderr.splitlines() if "took over the lease" in line]
    assert sorted(line.split(":")[0] for line in took) == sorted(
        f"host {h.name}" for h in testhost_pair
    ), stderr
    for line in took:
        assert f"sweep 'leasealpha' run {run_alpha.name}" in line
        assert f"its sweeper (pid {first.pid}) is gone" in line
    # The take-over stopped alpha's unit on exactly the hosts where it served when alpha died.
    stopped = [
        line for line in took if "stopped its server (unit ddtree-leasealpha.service)" in line
    ]
    assert sorted(line.split(":")[0] for line in stopped) == sorted(
        f"host {h.name}" for h in serving
    ), stderr
    beta_points = pd.read_parquet(Path(out.strip().splitlines()[-1]) / "points.parquet")
    assert len(beta_points) == 4 and (beta_points.status == "ok").all()
    recorded = (run_alpha / POINTS_LOG).read_text().splitlines()
    assert all(json.loads(line)["status"] == "ok" for line in recorded if line.strip())
    for host in testhost_pair:  # given back at the end
        assert host.exec(["test", "-e", "/opt/ddtree-sweeper/lease.json"]).returncode == 1
        state = host.exec(["systemctl", "is-active", "ddtree-leasealpha"]).stdout.strip()
        assert state != "active"
