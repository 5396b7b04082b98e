"""`sweeper diagnose` end to end on the fake runtime: a run broken exactly where cuda_graph is on
(so padding and the graph moved together), its diagnosis, the dry run's plan and cost, then the
follow-up as a new run linked to the first, with its evidence and verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweeper.results.reader import runs_of_sweep
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "sweeper.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def _broken_run(tmp: Path, port: int) -> Path:
    # Speculative configs with cuda_graph on emit wrong tokens; AR and graphs off are exact.
    env = fake_runtime_env(tmp, {"FAKE_WRONG_TOKENS": "1", "FAKE_WHEN": "cuda_graph=True,budget=8"})
    path = write_spec(tmp, port, fake_env=env, name="broken", max_tokens=6)
    data = yaml.safe_load(path.read_text())
    data["grid"]["cuda_graph"] = [True, False]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    done = _cli("run", str(path), "--results", str(tmp / "results"), "--plain")
    assert done.returncode == 4, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def test_diagnose_plans_then_runs_the_follow_up_linked_to_the_run(
    tmp_path: Path, port: int
) -> None:
    run_dir = _broken_run(tmp_path, port)

    dry = _cli("diagnose", str(run_dir), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    out = " ".join(dry.stdout.split())
    # 16 speculative requests and 8 AR ones (the reference, clean by definition) judged.
    assert "8 of 24 judged requests are violations (diverged 8)" in out
    # The fixed width pads every round here: the grid cannot tell padding from the fixed shape.
    assert "they live where fixed_shape_rounds > 0 (moved together with padded_rounds > 0" in out
    assert "cannot separate): 8 there (with 0 clean requests)" in out
    assert "focus: point local-b8-k1-bs4-cg1-t0-c1 on host local" in out
    assert "experiment batching: batch 1 vs batch N" in out
    assert "experiment cuda graph" in out and "experiment no padding" in out
    assert "not planned: chain: the run already settled it" in out  # topk 1 and 4 both broke
    assert "cost: " in out and " restarts, " in out
    assert len(runs_of_sweep(tmp_path / "results" / "broken-followup")) == 0  # nothing ran

    done = _cli("diagnose", str(run_dir), "--plain")
    assert done.returncode == 4, done.stderr  # the violations reproduce
    followup = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((followup / "manifest.json").read_text())
    assert manifest["follows"] == str(run_dir) and manifest["sweep"] == "broken-followup"
    assert (
        manifest["runtime_source_hash"]
        == json.loads((run_dir / "manifest.json").read_text())["runtime_source_hash"]
    )
    lines = done.stdout.splitlines()
    focus = "budget=8 topk=1 block_size=4 cuda_graph=on c=1"
    # Budget 8 breaks, the drafted length (block 4 - 1 = 3) does not: padding alone separates
    # (in this fake, the fixed width pads both; the real runtime's arms differ in padding).
    assert f"experiment no padding: separates: breaks only at {focus}" in lines
    assert f"experiment cuda graph: separates: breaks only at {focus}" in lines
    assert "experiment batching: both arms break: batching cleared" in lines
    assert any(line.startswith("verdict over the run and its follow-up: ") for line in lines)

    report = _cli("report", str(followup))
    assert report.returncode == 0, report.stderr
    html = Path(report.stdout.strip().splitlines()[-1]).read_text()
    assert "<h2>Diagnosis</h2>" in html and f"follows up run {run_dir}" in html


def test_a_fault_the_ar_path_shares_needs_a_trusted_baseline(tmp_path: Path, port: int) -> None:
    # Every config, AR included, emits the same wrong tokens: the run's own baseline agrees.
    env = fake_runtime_env(tmp_path, {"FAKE_WRONG_TOKENS": "1"})
    shared = write_spec(tmp_path, port, fake_env=env, name="shared", max_tokens=6)
    alone = _cli("run", str(shared), "--results", str(tmp_path / "results"), "--plain")
    assert alone.returncode == 0, alone.stderr  # invisible: AR is wrong the same way

    trusted_env = fake_runtime_env(tmp_path / "t")
    trusted = write_spec(tmp_path / "t", port, fake_env=trusted_env, max_tokens=6)
    first = _cli("run", str(trusted), "--results", str(tmp_path / "results"), "--plain")
    assert first.returncode == 0, first.stderr
    data = yaml.safe_load(shared.read_text())
    data["runtime"]["baseline_run"] = first.stdout.strip().splitlines()[-1]
    shared.write_text(yaml.safe_dump(data, sort_keys=False))
    judged = _cli("run", str(shared), "--results", str(tmp_path / "results"), "--plain")
    assert judged.returncode == 4, judged.stderr
    dry = _cli("diagnose", judged.stdout.strip().splitlines()[-1], "--dry-run")
    out = " ".join(dry.stdout.split())
    # The AR points broke too: nothing separates, speculation itself (mode) is cleared.
    assert "every judged request broke, so no factor separates them" in out
    assert "Cleared (violations at every value): " in out and " mode, " in out
