"""The nightly job end to end: real `sweeper run` subprocesses against the fake runtime.

One story: a first night runs while a second invocation overlaps it and is turned away by the
lock (exit 75); the next night is slower (the fake streams 10x slower), so the job reports the
comparison, prunes beyond --keep and exits 1 with one line for cron mail; the night after breaks
exactness, and the line carries the diagnosis of the newly broken config. The history beside the
results keeps all three nights, though only the last is left on disk.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.results.history import HISTORY_FILE, history_frame
from sweeper.schedule.nightly import paths_for
from tests.sweeper.conftest import free_port
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow


def _nightly(spec: Path, results: Path) -> list[str]:
    return [sys.executable, "-m", "sweeper.cli", "nightly", str(spec), "--results", str(results),
            "--keep", "1"]  # fmt: skip


def test_overlap_is_refused_then_a_slower_night_is_a_regression(tmp_path: Path) -> None:
    results = tmp_path / "results"
    port = free_port()
    fast = fake_runtime_env(tmp_path, {"FAKE_TOKEN_DELAY": "0.002", "FAKE_START_DELAY": "1.5"})
    spec = write_spec(tmp_path, port, fake_env=fast, topk=(4,))
    lock = paths_for(spec, results).lock
    first = subprocess.Popen(_nightly(spec, results), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (lock.exists() and lock.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    overlap = subprocess.run(_nightly(spec, results), capture_output=True, text=True, timeout=60)
    assert overlap.returncode == 75, overlap.stdout + overlap.stderr
    assert f"held by pid {first.pid}" in overlap.stdout
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 0, out
    assert out == ""  # a good night prints nothing, so cron sends no mail
    (night_one,) = sorted((results / "t").iterdir())
    assert (night_one / "report.html").exists()

    slow = fake_runtime_env(tmp_path, {"FAKE_TOKEN_DELAY": "0.02"})
    assert write_spec(tmp_path, port, fake_env=slow, topk=(4,)) == spec  # the same spec file
    second = subprocess.run(_nightly(spec, results), capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "REGRESSION" in second.stdout and "output_tok_s -" in second.stdout
    (night_two,) = sorted((results / "t").iterdir())  # --keep 1 pruned the first night
    assert night_two != night_one
    html = (night_two / "report.html").read_text()
    assert f"Compared with {night_one.name}" in html
    log = paths_for(spec, results).log.read_text()
    assert "skipped:" in log and f"pruned {night_one}" in log
    assert "run| " in log  # the sweep's own output is in the log
    recorded = [line for line in log.splitlines() if "run| history: " in line]
    assert len(recorded) == 2, log  # each night's `sweeper run` recorded itself

    wrong = fake_runtime_env(
        tmp_path, {"FAKE_TOKEN_DELAY": "0.02", "FAKE_WRONG_TOKENS": "1", "FAKE_WHEN": "topk=4"}
    )
    assert write_spec(tmp_path, port, fake_env=wrong, topk=(4,)) == spec
    third = subprocess.run(_nightly(spec, results), capture_output=True, text=True, timeout=120)
    assert third.returncode == 1, third.stdout + third.stderr
    assert "determinism broken (diverged), diagnosis: " in third.stdout
    assert "this config: 4/4 broken" in third.stdout
    (night_three,) = sorted((results / "t").iterdir())
    assert "this config: 4/4 broken" in (night_three / "report.html").read_text()
    # --keep 1 left one run on disk; the history keeps all three nights, each point once.
    history = history_frame(results / HISTORY_FILE)
    assert list(history.drop_duplicates("run_id")["run_id"]) == [
        night_one.name,
        night_two.name,
        night_three.name,
    ]
    assert not history.duplicated(["run_id", "point_id"]).any()
    assert history.groupby("run_id")["determinism"].apply(set).iloc[-1] >= {"diverged"}
