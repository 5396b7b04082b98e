"""Sampled points through a whole `sweeper run` (the fake runtime over real HTTP, as the runner
starts it): a fault that shifts only sampling is caught coupled (diverged against AR at the same
seed) and by distribution (shifted), exit 4, with temperature implicated; a server that does not
advertise the coupling the plan expected, and a sweep with no baseline, prove nothing: unproven,
never feasible, said at the end of the run and by `best`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweeper.diagnosis.runs import diagnose_run
from sweeper.report.assemble import build_view
from sweeper.report.render import render_html
from sweeper.results.reader import SAMPLES_LOG, read_jsonl, read_run
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

#: The fake samples evenly over 8 ids; FAKE_HOT_SAMPLING over 12, on the topk=4 server only
#: (`HOT`) or on both speculative servers (`ALL_HOT`: the AR server has no --budget).
HOT = {"FAKE_SAMPLING": "1", "FAKE_HOT_SAMPLING": "1", "FAKE_WHEN": "topk=4"}
ALL_HOT = {**HOT, "FAKE_WHEN": "budget=8"}


def sweep(
    tmp: Path, port: int, env: dict[str, str], workload: dict | None = None, **extra: Any
) -> tuple[subprocess.CompletedProcess[str], Path, pd.DataFrame]:
    spec = write_spec(
        tmp,
        port,
        fake_env=fake_runtime_env(tmp, env),
        temperature=(0.0, 0.7),
        prompts=3,
        repeats=1,
        extra_workload=workload,
        extra=extra,
    )
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--plain"]
        + ["--results", str(tmp / "results")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet").set_index("point_id")
    return done, run_dir, points


def _determinism(points: pd.DataFrame) -> dict[str, str]:
    return {str(k): str(v) for k, v in points["determinism"].items()}


def test_a_sampling_fault_is_diverged_when_coupled(tmp_path: Path, port: int) -> None:
    done, run_dir, points = sweep(tmp_path, port, ALL_HOT)
    assert done.returncode == 4, done.stderr[-2000:]
    assert _determinism(points) == {
        "local-ar-cg0-t0-c1": "n/a",
        "local-ar-cg0-t0.7-c1": "n/a",
        "local-b8-k1-bs4-cg0-t0-c1": "exact",  # greedy untouched
        "local-b8-k1-bs4-cg0-t0.7-c1": "diverged",
        "local-b8-k4-bs4-cg0-t0-c1": "exact",
        "local-b8-k4-bs4-cg0-t0.7-c1": "diverged",
    }
    assert set(points["sampled_check"].dropna()) == {"coupled"}
    assert not (run_dir / SAMPLES_LOG).exists()  # coupled: nothing to sample
    requests = pd.read_parquet(run_dir / "requests.parquet")
    ar = requests[(requests["mode"] == "ar") & (requests["temperature"] > 0)]
    assert all(len(m) == 8 for m in ar["sample_margins"])  # the AR's, for sampled near-ties
    found = diagnose_run(read_run(run_dir))
    assert found is not None and [t.condition.text for t in found.rule] == ["temperature = 0.7"]


def test_a_sampling_fault_is_shifted_by_distribution(tmp_path: Path, port: int) -> None:
    determinism = {"sampled": "distribution", "samples": 96}
    done, run_dir, points = sweep(
        tmp_path, port, HOT, workload={"concurrency": [1, 2]}, determinism=determinism
    )
    assert done.returncode == 4, done.stderr[-2000:]
    verdicts = _determinism(points)
    for load in ("c1", "c2"):  # c2 judged on the samples c1 drew: the same distribution
        assert verdicts[f"local-b8-k4-bs4-cg0-t0.7-{load}"] == "shifted"
        assert verdicts[f"local-b8-k1-bs4-cg0-t0.7-{load}"] == "distribution-ok"
    assert points.loc["local-b8-k4-bs4-cg0-t0.7-c2", "samples_point_id"] == (
        "local-b8-k4-bs4-cg0-t0.7-c1"
    )
    shifted = points.loc["local-b8-k4-bs4-cg0-t0.7-c1"]
    assert shifted["distribution_p"] <= 0.01 and shifted["distribution_n"] == 96
    assert 0 < shifted["distribution_shift"] <= 0.1  # determinism.max_shift's default
    assert points.loc["local-ar-cg0-t0.7-c1", "distribution_control_p"] > 0.01
    samples = read_jsonl(run_dir / SAMPLES_LOG)
    roles = pd.Series([s["role"] for s in samples]).value_counts().to_dict()
    assert roles == {"test": 2 * 3 * 96, "ar": 3 * 96, "control": 3 * 96}
    # Every role's seeds are its own: no sample of one set shares a seed with another set, and
    # none is shared between prompts (one seed per prompt and sample: independent draws).
    by_role = {r: {s["seed"] for s in samples if s["role"] == r} for r in roles}
    assert all(len(seeds) == 3 * 96 for seeds in by_role.values())
    assert not (by_role["test"] & by_role["ar"]) and not (by_role["ar"] & by_role["control"])
    assert "shifted" in done.stderr
    # The report and `diagnose` state the test, its p-value, N and what it detects.
    html = render_html(build_view(read_run(run_dir)))
    assert "Sampled outputs: how temperature &gt; 0 was proven" in html
    assert 'class="badge v-shifted"' in html and 'class="badge v-distribution-ok"' in html
    assert "permutation max-T" in html and "80% power" in html
    shown = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "diagnose", str(run_dir), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next(x for x in shown.stdout.splitlines() if "b8-k4-bs4-cg0-t0.7-c1: shifted" in x)
    assert "distribution, p 0.001, N 96 a side, detects >=" in line


def test_an_uncoupled_server_leaves_sampled_points_unproven(tmp_path: Path, port: int) -> None:
    done, _, points = sweep(tmp_path, port, {"FAKE_SAMPLING": "1", "FAKE_UNCOUPLED": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    sampled = points[(points["temperature"] > 0) & (points["mode"] != "ar")]
    assert set(sampled["determinism"]) == {"unproven"}
    assert all("does not advertise" in r for r in sampled["unproven_reason"])
    assert "unproven: 2 point(s)" in done.stderr


def test_no_baseline_proves_nothing_and_best_says_why(tmp_path: Path, port: int) -> None:
    done, run_dir, points = sweep(tmp_path, port, {}, baseline=False)
    assert done.returncode == 6, done.stderr[-2000:]  # nothing proven is not "all well"
    assert set(points["determinism"]) == {"unproven"}
    html = render_html(build_view(read_run(run_dir)))
    assert "4 points unproven" in html and 'class="badge v-unproven"' in html
    best = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "best", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert best.returncode == 3, best.stdout + best.stderr
    assert "winner" not in best.stdout
    assert best.stdout.count("unproven at t0") == 4  # 2 configs x 2 request configs
    assert "no baseline output to compare" in best.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["exit_code"] == 6  # the run's own code, recorded
