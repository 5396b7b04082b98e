"""`sweeper run` against two SSH + systemd test hosts, end to end through the real CLI.

- With the loopback fake runtime (through SSH tunnels, `access: tunnel`): one config that fails
  at start and one that never becomes ready are failed points with journal tails while the sweep
  goes on; a spec value with shell metacharacters reaches the runtime literally.
- With the real bundled runtime (tiny-random, `access: direct`): a two-host sweep whose results
  look like the local run's, surviving SSH connections dropped mid-sweep.

Root only (test hosts); skips with the reason elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest
import yaml

from sweeper.services.bundle import release_dir
from sweeper.workers.backends import runtime_bundle
from tests.sweeper.sweep_fixtures import shim_env, shim_files
from tests.sweeper.testhost_fixture import hosts_yaml, ssh_host
from tests.testhosts import TestHost

pytestmark = pytest.mark.slow

PWNED = '"; touch /tmp/pwned #'
FAKE_DIR = "/opt/fake-runtime"
# `python -m ddtree_runtime serve ...` on the host runs this shim (PYTHONPATH=FAKE_DIR): it saves
# the argv and NOTE it got for the test to read, misbehaves one way per host for the topk=4
# config, then runs the fake runtime. The process is launched exactly as requested, so the
# /proc identity proof holds for it.
PREAMBLE = """
import os
args = sys.argv[1:]
open({dir!r} + "/argv", "wb").write(b"".join(a.encode() + b"\\0" for a in args))
open({dir!r} + "/note", "w").write(os.environ.get("NOTE", ""))
if " --topk 4 " in " " + " ".join(args) + " ":
    {misbehave}
"""
MISBEHAVE = {
    0: "os.environ['FAKE_CRASH'] = '2'",  # exits at start like a bad flag (argparse exits 2)
    1: "os.environ['FAKE_START_DELAY'] = '100000'",  # /health stays 503: never ready
    None: "pass",
}


def _install_shim(host: TestHost, known_hosts: str, misbehave: int | None) -> None:
    ssh = ssh_host(host, known_hosts)
    preamble = PREAMBLE.format(dir=FAKE_DIR, misbehave=MISBEHAVE[misbehave])
    for name, text in shim_files(preamble=preamble).items():
        ssh.run(["mkdir", "-p", f"{FAKE_DIR}/ddtree_runtime"])
        ssh.put_file(f"{FAKE_DIR}/{name}", text.encode())
    ssh.close()


def _run_sweep(spec: Path, results: Path, timeout: float = 400) -> tuple[int, Path, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)]
        + ["--plain"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-3000:]
    return proc.returncode, Path(lines[-1]), proc.stderr


def _workload(prompts: int, max_tokens: int) -> dict:
    return {
        "api": "completions",
        "prompts": [
            {"id": f"p{i}", "text": f"Count with me: {i}, {i + 1},"} for i in range(prompts)
        ],
        "max_tokens": max_tokens,
        "repeats": 1,
        "concurrency": [1],
        "warmup": 1,
        "seed": 7,
    }


def _write_spec(tmp: Path, name: str, hosts: str, body: dict) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"name: {name}\n{hosts}" + yaml.safe_dump(body, sort_keys=False))
    return path


def test_failed_units_are_failed_points_and_values_arrive_literally(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    for index, host in enumerate(testhost_pair):
        _install_shim(host, session_known_hosts, index)
    hosts = hosts_yaml(testhost_pair, session_known_hosts, access="tunnel")
    spec = _write_spec(
        tmp_path,
        "remotefake",
        hosts,
        {
            "runtime": {
                "model": "fake",
                "port": 18300,
                "ready_timeout_s": 8,
                "extra_args": ["--note", PWNED],
                "env": {"NOTE": PWNED, **shim_env(FAKE_DIR)},
            },
            "grid": {"budget": [8], "topk": [1, 4], "block_size": [4], "cuda_graph": [False]},
            "baseline": True,
            "workload": _workload(prompts=2, max_tokens=6),
        },
    )
    code, run_dir, stderr = _run_sweep(spec, tmp_path / "results")
    points = pd.read_parquet(run_dir / "points.parquet")
    assert code == 3, stderr[-3000:]  # some point failed, the rest measured
    assert len(points) == 6  # (AR + topk 1 + topk 4) on each of the two hosts
    ok = points[points.status == "ok"]
    assert sorted(ok.host) == sorted([h.name for h in testhost_pair] * 2)
    assert set(ok.determinism) <= {"exact", "n/a"}
    failed = points[points.status == "failed"].set_index("host")
    crashed, hung = (failed.loc[h.name] for h in testhost_pair)
    assert crashed.topk == 4 and hung.topk == 4
    assert "exited" in crashed.reason and "injected start failure" in crashed.log_tail
    assert "not ready after 8 s" in hung.reason and "Started" in hung.log_tail
    for point_id in points.point_id:
        assert (run_dir / "logs" / f"{point_id}.log").exists()
    # each point's journal lines, captured by cursor, are in its log
    crashed_log = (run_dir / "logs" / f"{crashed.point_id}.log").read_text()
    assert "injected start failure (exit 2)" in crashed_log
    ok_log = (run_dir / "logs" / f"{ok.point_id.iloc[0]}.log").read_text()
    assert "fake runtime listening" in ok_log and "injected" not in ok_log
    # The metacharacters reached the runtime as one literal argument and env value.
    for host in testhost_pair:
        argv = (host.root / FAKE_DIR.lstrip("/") / "argv").read_bytes().split(b"\0")
        assert PWNED.encode() in argv
        assert (host.root / FAKE_DIR.lstrip("/") / "note").read_text() == PWNED
        assert host.exec(["test", "-e", "/tmp/pwned"]).returncode == 1
        assert host.exec(["systemctl", "is-active", "ddtree-remotefake"]).stdout.strip() != "active"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert set(manifest["hosts"]) == {h.name for h in testhost_pair}
    # the deployed bundle's content hash is in the manifest, and is the release that ran
    bundle = runtime_bundle()
    for host in testhost_pair:
        assert manifest["hosts"][host.name]["bundle_sha256"] == bundle.sha256
        release = host.root / release_dir("/opt/ddtree-sweeper", bundle).lstrip("/")
        assert (release / "ddtree_runtime" / "__init__.py").exists()


def test_an_unreachable_host_fails_its_points_and_the_other_host_goes_on(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    """The second host's key is unknown: its points fail with the fix; the first host runs."""
    first, second = testhost_pair
    _install_shim(first, session_known_hosts, None)
    known = tmp_path / "known_hosts"
    known.write_text(f"{first.address} {first.host_key_line}\n")
    hosts = hosts_yaml(testhost_pair, str(known), access="tunnel")
    spec = _write_spec(
        tmp_path,
        "remotehalf",
        hosts,
        {
            "runtime": {
                "model": "fake",
                "port": 18310,
                "ready_timeout_s": 20,
                "env": shim_env(FAKE_DIR),
            },
            "grid": {"budget": [8], "topk": [1], "block_size": [4], "cuda_graph": [False]},
            "baseline": True,
            "workload": _workload(prompts=1, max_tokens=4),
        },
    )
    code, run_dir, stderr = _run_sweep(spec, tmp_path / "results")
    points = pd.read_parquet(run_dir / "points.parquet").set_index("point_id")
    assert code == 3, stderr[-3000:]
    assert (points[points.host == first.name].status == "ok").all()
    lost = points[points.host == second.name]
    assert len(lost) == 2 and (lost.status == "failed").all()
    assert lost.reason.str.contains("ssh-keyscan").all()
    assert known.read_text() == f"{first.address} {first.host_key_line}\n"  # nothing accepted


def _drop_connections(host: TestHost, stop: threading.Event, drops: list[float]) -> None:
    """Kill the sshd session processes of `host` every few seconds while the sweep runs."""
    started = time.monotonic()
    while not stop.wait(4.0):
        listener = host.exec(["systemctl", "show", "-p", "MainPID", "--value", "ssh.service"])
        if listener.stdout.strip() in ("", "0"):
            continue  # no listener pid: never ask for children of pid 0
        sessions = host.exec(["ps", "-o", "pid=", "--ppid", listener.stdout.strip()]).stdout
        for pid in sessions.split():
            host.exec(["kill", "-9", pid])
        if sessions.split():
            drops.append(time.monotonic() - started)


def test_two_host_sweep_of_the_real_runtime_survives_dropped_connections(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    spec = _write_spec(
        tmp_path,
        "remotereal",
        hosts_yaml(testhost_pair, session_known_hosts, access="direct"),
        {
            "runtime": {
                "model": "tiny-random",
                "draft": "ngram",
                "device": "cpu",
                "port": 18400,
                "ready_timeout_s": 120,
            },
            "grid": {"budget": [8], "topk": [2], "block_size": [4], "cuda_graph": [False]},
            "baseline": True,
            "leave_running": True,
            "workload": _workload(prompts=2, max_tokens=12),
        },
    )
    stop, drops = threading.Event(), []  # type: ignore[var-annotated]
    dropper = threading.Thread(target=_drop_connections, args=(testhost_pair[0], stop, drops))
    dropper.start()
    try:
        code, run_dir, stderr = _run_sweep(spec, tmp_path / "results")
    finally:
        stop.set()
        dropper.join()
    points = pd.read_parquet(run_dir / "points.parquet")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert drops, "no SSH connection was dropped during the sweep"
    assert code == 0, (points[["host", "point_id", "status", "reason"]], stderr[-3000:])
    assert len(points) == 4 and (points.status == "ok").all()
    assert list(points.sort_values(["host", "started_at"])["mode"]) == ["ar", "speculative"] * 2
    assert set(points[points["mode"] == "speculative"].determinism) == {"exact"}
    assert points.output_tok_s.gt(0).all()
    # Temperature 0 and a lossless runtime: per prompt, AR and DDTree on both hosts give the
    # same tokens.
    assert len(requests) == 8
    assert requests.groupby("prompt_id").sha256.nunique().max() == 1
    # leave_running: the last config still serves on each host, under systemd
    for host in testhost_pair:
        assert host.exec(["systemctl", "is-active", "ddtree-remotereal"]).stdout.strip() == "active"
        info = httpx.get(f"http://{host.address}:18400/server_info", timeout=10).json()
        assert info["fingerprint_inputs"]["config"]["speculative"] == "ddtree"
        host.exec(["systemctl", "stop", "ddtree-remotereal"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for host in testhost_pair:
        facts = manifest["hosts"][host.name]
        assert facts["address"] == host.address
        assert facts["reported_source_hash"] == manifest["runtime_source_hash"]
