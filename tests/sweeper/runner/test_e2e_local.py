"""End to end: `sweeper run` on a small sweep against the real bundled runtime (tiny-random model):
AR baseline + 2 speculative configs, greedy and sampled (temperature 0.7, seed 7), 2 prompts x 2
repeats, 16 tokens; every point proven, measured, recorded, and exact (or a near tie) against
the baseline: the sampled ones token for token at the same seed, since the runtime advertises
coupled sampling."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper.proof.scored.catalog import SCORING
from sweeper.results.store import RunStore
from sweeper.services.runtime_package import runtime_source_hash
from tests.sweeper.sweep_fixtures import write_spec

pytestmark = pytest.mark.slow


def test_small_sweep_against_real_runtime(tmp_path: Path, port: int) -> None:
    spec = write_spec(
        tmp_path,
        port,
        fake_env=None,
        max_tokens=16,
        repeats=2,
        ready_timeout_s=240,
        temperature=(0.0, 0.7),
        extra_runtime={"device": "cpu"},
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper.cli",
            "run",
            str(spec),
            "--plain",
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet")
    assert done.returncode == 0, done.stderr[-3000:] + "\n" + points.to_string()
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert list(points["mode"]) == ["ar"] * 2 + ["speculative"] * 4
    assert (points.status == "ok").all()
    assert set(points.determinism[2:]) <= {"exact", "near-tie"}
    sampled = points[points["temperature"] > 0]
    assert list(sampled["sampled_check"]) == ["coupled"] * 3
    assert points.fingerprint.nunique() == 3  # three distinct configs, each proven
    assert len(requests) == 24 and (requests.output_tokens > 0).all()
    # The engine's calibrated near-tie margin on every request: what the greedy judge reads.
    assert set(requests.near_tie_margin) == {SCORING["ddtree_runtime"].near_tie_margin}
    ar_sampled = requests[(requests["mode"] == "ar") & (requests["temperature"] > 0)]
    # The AR's sample margins: what tells a sampled near-tie from a divergence.
    margins = zip(ar_sampled.sample_margins, ar_sampled.output_tokens, strict=True)
    assert all(len(m) == n for m, n in margins)
    assert (requests.output_tokens <= 16).all()
    assert requests[requests["mode"] == "speculative"].tau.ge(1).all()
    manifest = RunStore.open(run_dir).manifest
    assert manifest.status == "complete"
    # The runtime reports the source hash the controller computed from the package files at the
    # start of the run (a tree edited during the run would differ, and the manifest shows it).
    assert manifest.hosts["local"].reported_source_hash == manifest.runtime_source_hash
    assert len(runtime_source_hash()) == 64
