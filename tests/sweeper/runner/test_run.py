"""`sweeper run` as a process: SIGKILL mid-run then resume loses and duplicates nothing; Ctrl-C
stops the server and leaves a resumable run; the run directory is the last line printed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sweeper.results.reader import POINTS_LOG
from sweeper.results.store import RunStore
from sweeper.services.local_process import port_in_use
from tests.signals import default_signals
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

N_POINTS = 6  # AR + 2 ddtree configs, x temperature {0, 0.7}
PER_POINT = 4  # 2 prompts x 2 repeats


def _sweeper(*args: str) -> list[str]:
    return [sys.executable, "-m", "sweeper.cli", "run", *args, "--plain"]


def _spec(tmp: Path, port: int) -> Path:
    env = fake_runtime_env(tmp, {"FAKE_TOKEN_DELAY": "0.03", "FAKE_START_DELAY": "0.2"})
    return write_spec(tmp, port, fake_env=env, temperature=(0.0, 0.7), max_tokens=10)


def _wait_points(results: Path, n: int, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in results.glob(f"t/*/{POINTS_LOG}"):
            if len(log.read_text().splitlines()) >= n:
                return log.parent
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} points recorded in {timeout} s")


def _pid_alive(pid: int) -> bool:
    """Running and not a zombie (state field of /proc/pid/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_resume_after_sigkill_loses_and_duplicates_nothing(tmp_path: Path, port: int) -> None:
    spec, results = _spec(tmp_path, port), tmp_path / "results"
    first = subprocess.Popen(
        [*_sweeper(str(spec), "--results", str(results))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    run_dir = _wait_points(results, 2)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)
    before = {p["point_id"]: p["attempt"] for p in RunStore.open(run_dir).points().values()}
    assert 2 <= len(before) < N_POINTS
    # The runtime the killed sweeper started is orphaned but still running (own session).
    orphan = json.loads((run_dir / "service" / "local" / "runtime.pid").read_text())["pid"]
    assert _pid_alive(orphan)

    resumed = subprocess.run(
        _sweeper(str(spec), "--results", str(results), "--resume-latest"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip().splitlines()[-1] == str(run_dir)
    assert not _pid_alive(orphan)  # reaped through the pidfile, not by name
    points = pd.read_parquet(run_dir / "points.parquet")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert len(points) == N_POINTS and points.point_id.is_unique
    assert (points.status == "ok").all()
    assert len(requests) == N_POINTS * PER_POINT
    assert not requests.duplicated(["point_id", "prompt_id", "repeat"]).any()
    kept = points.set_index("point_id").attempt
    assert all(kept[pid] == attempt for pid, attempt in before.items())  # not redone
    manifest = RunStore.open(run_dir).manifest
    assert manifest.status == "complete" and len(manifest.resumed_at) == 1
    assert (manifest.points_done, manifest.points_ok) == (N_POINTS, N_POINTS)
    assert not port_in_use(port)


def test_ctrl_c_stops_server_and_leaves_resumable_run(tmp_path: Path, port: int) -> None:
    spec, results = _spec(tmp_path, port), tmp_path / "results"
    proc = subprocess.Popen(
        _sweeper(str(spec), "--results", str(results)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,  # Ctrl-C must reach it whoever started the suite
    )
    run_dir = _wait_points(results, 1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out.strip().splitlines()[-1] == str(run_dir)
    assert "--resume" in err
    assert not port_in_use(port)
    store = RunStore.open(run_dir)
    assert store.manifest.status == "interrupted"
    done = len(store.points())
    assert 1 <= done < N_POINTS
    resumed = subprocess.run(
        _sweeper(str(spec), "--results", str(results), "--resume", str(run_dir)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert len(pd.read_parquet(run_dir / "requests.parquet")) == N_POINTS * PER_POINT


def test_usage_errors_exit_2(tmp_path: Path, port: int) -> None:
    spec = _spec(tmp_path, port)
    both = subprocess.run(
        _sweeper(str(spec), "--resume", str(tmp_path), "--resume-latest"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert both.returncode == 2 and "not both" in both.stderr
    missing = subprocess.run(
        _sweeper(str(spec), "--results", str(tmp_path / "none"), "--resume-latest"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "no run of sweep 't'" in missing.stderr


def test_dry_run_prints_plan_and_starts_nothing(tmp_path: Path, port: int) -> None:
    spec = _spec(tmp_path, port)
    out = subprocess.run(
        _sweeper(str(spec), "--results", str(tmp_path / "r"), "--dry-run"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "3 restarts, 6 points" in out.stdout
    assert not (tmp_path / "r").exists()


def test_a_resume_with_other_inputs_is_refused_or_forked(tmp_path: Path, port: int) -> None:
    """Issue 28 #2: a dataset file edited between a run and its resume (the prompts the AR
    baseline answered are not the ones the rest would be judged on)."""
    (tmp_path / "more.jsonl").write_text('{"id": "extra", "text": "first wording"}\n')
    env = fake_runtime_env(tmp_path, {"FAKE_START_DELAY": "0"})
    spec = write_spec(
        tmp_path, port, fake_env=env, topk=(4,), prompts=1, repeats=1, max_tokens=4,
        extra_workload={"prompts_file": "more.jsonl"},
    )  # fmt: skip
    results = tmp_path / "results"
    first = subprocess.run(
        _sweeper(str(spec), "--results", str(results)), capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    before = (run_dir / POINTS_LOG).read_bytes()
    (tmp_path / "more.jsonl").write_text('{"id": "extra", "text": "second wording"}\n')
    again = [*_sweeper(str(spec), "--results", str(results), "--resume", str(run_dir))]
    refused = subprocess.run(again, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert "spec workload.prompts[1].text; the file " in refused.stderr
    assert "more.jsonl changed" in refused.stderr
    assert (run_dir / POINTS_LOG).read_bytes() == before  # nothing of the old run touched
    forked = subprocess.run(
        [*again, "--force-new-inputs"], capture_output=True, text=True, timeout=120
    )
    assert forked.returncode == 0, forked.stderr
    new_dir = Path(forked.stdout.strip().splitlines()[-1])
    assert new_dir != run_dir and new_dir.parent == run_dir.parent
    assert RunStore.open(new_dir).manifest.follows == str(run_dir)
    assert (run_dir / POINTS_LOG).read_bytes() == before
