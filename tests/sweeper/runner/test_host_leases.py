"""Two `sweeper run`s of different specs aimed at one host (this machine, one port), through the
real CLI with the fake runtime: the second refuses naming the first, or waits for it
(`--wait-for-hosts`); when the first is killed with SIGKILL the second takes its lease over with
one line, stops the server the first left running, and no point of either run fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from sweeper.results.reader import POINTS_LOG
from tests.sweeper.hosts.lease_damage import gone_text
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow


def _sweeper(spec: Path, results: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)] + [
        "--plain",
        *extra,
    ]


def _wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"no {what} in {timeout} s")


def test_two_specs_on_one_host_refuse_wait_and_take_over(tmp_path: Path, port: int) -> None:
    slow = fake_runtime_env(tmp_path, {"FAKE_TOKEN_DELAY": "0.08", "FAKE_START_DELAY": "0.2"})
    # Alpha's 9 configs take minutes: it is still running however long beta's refused run, `ls`
    # and waiting start take on a loaded host, and it is killed as soon as beta waits.
    alpha = write_spec(
        tmp_path, port, fake_env=slow, name="alpha", topk=tuple(range(1, 9)), max_tokens=12
    )
    beta = write_spec(tmp_path, port, fake_env=slow, name="beta", topk=(2,), max_tokens=4)
    results = tmp_path / "results"
    first = subprocess.Popen(
        _sweeper(alpha, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for(lambda: any(results.glob(f"alpha/*/{POINTS_LOG}")), "first point of alpha")
        run_alpha = next(results.glob(f"alpha/*/{POINTS_LOG}")).parent

        refused = subprocess.run(_sweeper(beta, results), capture_output=True, text=True)
        assert refused.returncode == 75, refused.stderr
        said = refused.stderr.strip().splitlines()
        assert len(said) == 1, said
        assert said[0].startswith("error: host local is leased to sweep 'alpha' ")
        assert f"run {run_alpha.name} (pid {first.pid} on " in said[0]
        assert "--wait-for-hosts" in said[0]
        assert not (results / "beta").exists() or not any((results / "beta").iterdir())
        listed = subprocess.run(
            [sys.executable, "-m", "sweeper.cli", "ls", "--results", str(results)],
            capture_output=True,
            text=True,
        )
        assert f"held by sweep 'alpha' run {run_alpha.name} (pid {first.pid} " in listed.stdout

        log = tmp_path / "beta.stderr"
        with log.open("w") as err:
            second = subprocess.Popen(
                _sweeper(beta, results, "--wait-for-hosts", "120"),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        _wait_for(lambda: "waiting for host local" in log.read_text(), "waiting line")
        assert f"sweep 'alpha' run {run_alpha.name}" in log.read_text()
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
    out, _ = second.communicate(timeout=120)
    stderr = log.read_text()
    assert second.returncode == 0, stderr[-3000:]
    took = [line for line in stderr.splitlines() if "took over the lease" in line]
    assert len(took) == 1, stderr
    assert took[0].startswith(
        f"host local: took over the lease of sweep 'alpha' run {run_alpha.name}"
    )
    assert f"its sweeper (pid {first.pid}) is gone" in took[0]
    assert "stopped its server (pidfile " in took[0]  # alpha's orphaned server, by its pidfile
    beta_points = pd.read_parquet(Path(out.strip().splitlines()[-1]) / "points.parquet")
    assert len(beta_points) == 2 and (beta_points.status == "ok").all()
    recorded = (run_alpha / POINTS_LOG).read_text().splitlines()
    alpha_points = [json.loads(line) for line in recorded if line.strip()]
    assert alpha_points and all(p["status"] == "ok" for p in alpha_points)


def test_a_damaged_lease_never_lets_two_runs_share_the_host(tmp_path: Path, port: int) -> None:
    """Issue 40 #3, as found: an empty lease.json let a run go on without a lease and a second
    run 5 s later ran beside it. Now each of two runs 5 s apart stops with one line naming the
    file (exit 5), as `ls` does, and nothing is written; a dead holder's lease ending in CRLF is
    taken over by its exact bytes, and a second run while the first holds it is refused."""
    state = tmp_path / "state"
    state.mkdir()
    lease = state / "lease.json"
    lease.write_bytes(b"")
    env = {**os.environ, "SWEEPER_STATE_DIR": str(state)}
    slow = fake_runtime_env(tmp_path, {"FAKE_TOKEN_DELAY": "0.1"})
    # alpha must still hold the lease when it is interrupted below, after a refused second
    # `sweeper run` (seconds of CLI start-up, tens on a loaded host): 20 repeats of 2.4 s
    # requests per config keep it running for minutes, and Ctrl-C ends it within seconds.
    alpha, beta = (
        write_spec(
            tmp_path, port, fake_env=slow, name=name, topk=(4,), prompts=1, max_tokens=24,
            repeats=20,
        )
        for name in ("alpha", "beta")
    )  # fmt: skip
    results = tmp_path / "results"
    said = f"error: host local: the lease file {lease} is empty; if no run is using host local, "
    said += f"remove it (rm {lease}) and start again"
    first = subprocess.Popen(
        _sweeper(alpha, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    time.sleep(5)
    second = subprocess.run(_sweeper(beta, results), capture_output=True, text=True, env=env)
    _, first_err = first.communicate(timeout=60)
    for code, err in ((first.returncode, first_err), (second.returncode, second.stderr)):
        assert (code, err.strip().splitlines()) == (5, [said]), err
    listed = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "ls", "--results", str(results)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert (listed.returncode, listed.stderr.strip()) == (5, said), listed.stderr
    assert lease.read_bytes() == b"" and not [p for p in results.iterdir() if p.is_dir()]

    lease.write_bytes(gone_text() + b"\r\n")
    first = subprocess.Popen(
        _sweeper(alpha, results), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _wait_for(lambda: any(results.glob("alpha/*/manifest.json")), "alpha's run directory")
        refused = subprocess.run(_sweeper(beta, results), capture_output=True, text=True, env=env)
        assert refused.returncode == 75, refused.stderr
        assert "error: host local is leased to sweep 'alpha' " in refused.stderr
        assert f"(pid {first.pid} on " in refused.stderr
    finally:
        first.send_signal(signal.SIGINT)  # enough seen: its lease is given back on Ctrl-C
        _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err[-3000:]
    took = [line for line in err.splitlines() if "took over the lease" in line]
    assert took == [
        "host local: took over the lease of sweep 'old' run 20261204T000000000Z-aaaaaa (pid 4242 "
        "on elsewhere, since 2026-12-04 00:00:00 UTC): the host has booted since it was taken"
    ], err
    assert not lease.exists()  # given back
