"""End to end with `n: 3`: `sweeper run` against the real bundled runtime (tiny-random) at
temperature 0, an AR baseline and one speculative config, one prompt: every choice of every
request is recorded as a row of its own (`choice` 0..2) and proven exact against the baseline's
greedy output; the request's timing is counted once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.sweeper.sweep_fixtures import write_spec

pytestmark = pytest.mark.slow


def test_every_choice_of_a_greedy_n3_sweep_is_exact(tmp_path: Path, port: int) -> None:
    spec = write_spec(
        tmp_path,
        port,
        fake_env=None,
        topk=(4,),
        prompts=1,
        max_tokens=8,
        repeats=1,
        ready_timeout_s=240,
        extra_runtime={"device": "cpu"},
        extra_workload={"n": 3},
    )
    command = [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--plain"]
    done = subprocess.run(
        [*command, "--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet")
    assert done.returncode == 0, done.stderr[-3000:] + "\n" + points.to_string()
    assert list(points["mode"]) == ["ar", "speculative"]
    assert list(points["status"]) == ["ok", "ok"] and list(points["n"]) == [3, 3]
    assert points["determinism"].iloc[1] == "exact"
    requests = pd.read_parquet(run_dir / "requests.parquet")
    spec_rows = requests[requests["mode"] == "speculative"]
    assert list(spec_rows["choice"]) == [0, 1, 2]
    assert list(spec_rows["verdict"]) == ["exact"] * 3
    ar_ids = requests[requests["mode"] == "ar"]["token_ids"].map(list)
    # Greedy: every choice is the AR's one greedy output.
    assert all(list(ids) == list(ar_ids.iloc[0]) for ids in [*ar_ids, *spec_rows["token_ids"]])
    # Timing once per request (its choice-0 row), output tokens of every choice.
    assert spec_rows["ttft"].notna().tolist() == [True, False, False]
    assert (points["n_requests"] == 1).all()
    assert (points["output_tokens"] == 3 * len(ar_ids.iloc[0])).all()
