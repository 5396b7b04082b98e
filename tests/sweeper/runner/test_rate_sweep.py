"""`sweeper run` with open-loop points on the fake runtime, then `sweeper report` and `compare`:
rates are request configs measured through the multi-process client, the AR baseline and the
tree get the same seeded schedule at each rate, sends follow it, and the records carry the
timeline, goodput and the client's self-check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.measure.arrivals import ArrivalProfile, schedule
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

RATE, ARRIVALS, SEED = 20.0, 12, 7


def _sweeper(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sweeper.cli", *args], capture_output=True, text=True, timeout=240
    )


def test_open_loop_sweep_end_to_end(tmp_path: Path, port: int) -> None:
    env = fake_runtime_env(tmp_path, {"FAKE_TOKEN_DELAY": "0.01", "FAKE_START_DELAY": "0.2"})
    spec = write_spec(
        tmp_path,
        port,
        fake_env=env,
        topk=(4,),
        max_tokens=8,
        extra_workload={
            "concurrency": [3],
            "load": {"rate": [RATE, "inf"], "requests": ARRIVALS},
            "client_processes": 2,
        },
        extra={"slo": {"ttft_s": 2.0, "itl_s": 0.5, "attainment": 0.9}},
    )
    results = tmp_path / "results"
    run = _sweeper("run", str(spec), "--results", str(results), "--plain")
    assert run.returncode == 0, run.stderr
    run_dir = Path(run.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet").set_index("point_id")
    requests = pd.read_parquet(run_dir / "requests.parquet")

    loads = ("c3", "r20", "rinf")
    assert sorted(points.index) == sorted(
        f"local-{config}-t0-{load}" for config in ("ar-cg0", "b8-k4-bs4-cg0") for load in loads
    )
    assert (points.status == "ok").all() and not points.client_bound.any()
    assert (points.client_processes == 2).all()
    assert list(points[points["mode"] != "ar"].determinism.unique()) == ["exact"]
    opened = points[points.rate.notna()]
    assert opened.concurrency.isna().all() and (opened.arrival == "poisson").all()
    assert (opened.n_requests == ARRIVALS).all() and opened.goodput_share.notna().all()
    closed = points[points.rate.isna()]
    assert (closed.max_in_flight == 3).all()  # 3 slots over 2 processes, held globally

    def timeline(point_id: str) -> pd.DataFrame:
        return requests[requests.point_id == point_id].sort_values("index")

    expected = schedule(ArrivalProfile(rate=RATE, requests=ARRIVALS), SEED)
    ar, tree = timeline("local-ar-cg0-t0-r20"), timeline("local-b8-k4-bs4-cg0-t0-r20")
    np.testing.assert_allclose(ar.scheduled_s, expected, atol=1e-6)
    np.testing.assert_allclose(tree.scheduled_s, expected, atol=1e-6)
    for frame in (ar, tree):
        assert (frame.sent_s >= frame.scheduled_s).all()
        assert (frame.sent_s - frame.scheduled_s).median() < 0.02
        assert (frame.done_s > frame.sent_s).all() and frame.finished.all()
        assert sorted(frame.worker.unique()) == [0, 1]
    # Each prompt takes turns: request i is prompt i mod 2, repeat i div 2.
    assert list(ar.prompt_id[:4]) == ["p0", "p1", "p0", "p1"]
    assert list(ar.repeat[:4]) == [0, 0, 1, 1]
    burst = timeline("local-ar-cg0-t0-rinf")
    assert (burst.scheduled_s == 0).all() and len(burst) == ARRIVALS

    out = tmp_path / "report.html"
    report = _sweeper("report", str(run_dir), "-o", str(out))
    assert report.returncode == 0, report.stderr
    html = out.read_text()
    assert "Rate sweep: knees and latency speedups" in html
    assert 'alt="Rate sweep: local T=0, poisson"' in html
    assert "r=20/s" in html and "r=inf" in html and "c=3" in html
    compare = _sweeper("compare", str(run_dir), str(run_dir))
    assert compare.returncode == 0, compare.stderr
    assert "6 points compared" in compare.stdout
