"""A proof survives its run being stopped: samples are on disk as they are drawn, so a sweep
stopped (SIGTERM) mid-drawing resumes drawing only the missing ones; and a speculative server
that dies after drawing its samples, before scoring them, leaves its point pending (exit 3), and
`--resume` scores it on a fresh server of that config and settles it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.results.reader import POINTS_LOG, SAMPLES_LOG, SETTLED_LOG, read_jsonl
from sweeper.results.store import RunStore
from tests.signals import default_signals
from tests.sweeper.planted import plant_fault
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

#: The AR point draws two roles (its baseline set and its control), the speculative one one.
SAMPLES, PROMPTS = 8, 2
AR_SAMPLES, SPEC_SAMPLES = 2 * PROMPTS * SAMPLES, PROMPTS * SAMPLES


def _run(*args: str) -> list[str]:
    return [sys.executable, "-m", "sweeper.cli", "run", *args, "--plain"]


def _wait_drawing(results: Path, at_least: int, timeout: float = 60) -> Path:
    """The run directory once `at_least` samples are on disk and no point line is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in results.glob(f"t/*/{SAMPLES_LOG}"):
            points = log.parent / POINTS_LOG
            if points.exists() and points.read_text():
                raise AssertionError("the sampled point was recorded before its samples were kept")
            if len(log.read_text().splitlines()) >= at_least:
                return log.parent
        for log in results.glob(f"t/*/{POINTS_LOG}"):
            if log.read_text():
                raise AssertionError(
                    f"a point was recorded and no {SAMPLES_LOG} was written while it drew"
                )
        time.sleep(0.02)
    raise AssertionError(f"fewer than {at_least} samples on disk in {timeout} s")


def test_a_sweep_stopped_mid_drawing_resumes_drawing_only_the_missing_samples(
    tmp_path: Path, port: int
) -> None:
    env = fake_runtime_env(tmp_path, {"FAKE_SAMPLING": "1", "FAKE_TOKEN_DELAY": "0.03"})
    determinism = {"sampled": "distribution", "samples": SAMPLES, "sample_concurrency": 2}
    spec = write_spec(
        tmp_path, port, fake_env=env, topk=(1,), temperature=(0.7,), prompts=PROMPTS,
        repeats=1, extra={"determinism": determinism},
    )  # fmt: skip
    results = tmp_path / "results"
    first = subprocess.Popen(
        _run(str(spec), "--results", str(results)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    try:
        run_dir = _wait_drawing(results, 4)
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err[-2000:]
    kept = (run_dir / SAMPLES_LOG).read_text().splitlines()
    assert 4 <= len(kept) < AR_SAMPLES and not RunStore.open(run_dir).points()

    resumed = subprocess.run(
        _run(str(spec), "--results", str(results), "--resume", str(run_dir)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 6, resumed.stderr[-3000:]  # N = 8 proves nothing, by design
    lines = (run_dir / SAMPLES_LOG).read_text().splitlines()
    assert lines[: len(kept)] == kept  # append-only: the kept samples stand as they were
    rows = [json.loads(line) for line in lines]
    # Only the missing ones were drawn: every sample once, by its key and by its seed.
    assert len(rows) == AR_SAMPLES + SPEC_SAMPLES
    keys = {(r["point_id"], r["role"], r["prompt_id"], r["index"]) for r in rows}
    assert len(keys) == len(rows) and len({r["seed"] for r in rows}) == len(rows)
    assert not any(r["error"] for r in rows)
    # And they count: the resumed point's attempt is the one that drew them.
    store = RunStore.open(run_dir)
    points = store.points()
    assert len(store.samples(points)) == AR_SAMPLES + SPEC_SAMPLES
    assert points["local-ar-cg0-t0.7-c1"]["attempt"] == json.loads(kept[0])["attempt"]
    # Judged on all of them: N = 8 a side (too few to prove anything, which is not the point).
    spec_point = points["local-b8-k1-bs4-cg0-t0.7-c1"]
    assert spec_point["distribution_n"] == SAMPLES, spec_point
    assert "too few samples" in spec_point["unproven_reason"]
    assert read_jsonl(run_dir / POINTS_LOG)[0]["distribution_control_p"] > 0.01


#: The line of the runtime's `POST /score` (its worker-thread half) that the dying copy follows
#: with its exit.
_SCORE_LINE = "    request = parse_body(ScoreRequest, body)\n"


def _dying_scorer(dest: Path, trigger: Path) -> Path:
    """A copy of the runtime whose speculative server exits (as a killed process would) at its
    first scoring of a sample while `trigger` exists; the negotiation's probe (one token) and
    the AR server score as usual. The trigger is a file, so the copy's source, and so the run's
    source hash, stays the same when the test removes it before resuming."""
    package = plant_fault(dest, None)
    app = package / "ddtree_runtime" / "server" / "app.py"
    text = app.read_text()
    assert text.count(_SCORE_LINE) == 1
    dies = (
        f"    if state.config.speculative != 'none' and os.path.exists({str(trigger)!r}) "
        "and len(request.continuation) > 1:\n"
        "        os._exit(9)\n"
    )
    future = "from __future__ import annotations\n"
    text = text.replace(future, future + "import os\n", 1)
    app.write_text(text.replace(_SCORE_LINE, _SCORE_LINE + dies))
    return package


def test_a_scorer_killed_after_sampling_leaves_its_point_pending_and_resume_settles_it(
    tmp_path: Path, port: int
) -> None:
    trigger = tmp_path / "die"
    trigger.write_text("")
    package = _dying_scorer(tmp_path / "dying", trigger)
    determinism = {"sampled": "scored", "samples": 4, "sample_tokens": 4}
    spec = write_spec(
        tmp_path, port, fake_env=None, topk=(1,), temperature=(0.7,), prompts=PROMPTS,
        repeats=1, ready_timeout_s=240, extra={"determinism": determinism},
        extra_runtime={"device": "cpu", "package": str(package)},
    )  # fmt: skip
    results = str(tmp_path / "results")
    first = subprocess.run(
        _run(str(spec), "--results", results), capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 3, first.stderr[-3000:]  # a server died: not "nothing proven"
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    point = "local-b8-k1-bs4-cg0-t0.7-c1"
    pending = RunStore.open(run_dir).points()[point]
    assert pending["scored_pending"] is True and pending["determinism"] == "unproven"
    assert "could not be scored yet" in pending["unproven_reason"], pending["unproven_reason"]
    samples_before = (run_dir / SAMPLES_LOG).read_text()
    trigger.unlink()

    resumed = subprocess.run(
        _run(str(spec), "--results", results, "--resume", str(run_dir)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode in (0, 6), resumed.stderr[-3000:]  # 6: too few tokens to prove
    store = RunStore.open(run_dir)
    points = store.points()
    settled = points[point]
    assert settled["attempt"] == pending["attempt"]  # not measured again, only scored
    assert settled["scored_pending"] is False and settled["scored_by"] == "self"
    assert "could not be scored yet" not in settled["sampled_detail"]
    assert (run_dir / SAMPLES_LOG).read_text() == samples_before  # nothing drawn again
    # Scored on its measured requests (each at its own seed) and the samples drawn beside them,
    # each once (the failed scores stay on disk, superseded): 4 samples of 4 tokens per prompt
    # are needed, one measured request of up to 8 gives 2 of them, so 2 are drawn per prompt.
    own = [s for s in store.samples(points) if s["point_id"] == point]
    measured = [r for r in store.requests(points) if r["point_id"] == point]
    scored = [s for s in store.scores(points) if s["point_id"] == point]
    assert len(own) == PROMPTS * 2 and not any(s["error"] for s in scored)
    assert len({r["seed"] for r in measured}) == len(measured) == PROMPTS
    assert {(s["source"], s["role"], s["prompt_id"], s["index"]) for s in scored} == {
        ("sample", s["role"], s["prompt_id"], s["index"]) for s in own
    } | {("request", "test", r["prompt_id"], r["index"]) for r in measured}
    assert settled["scored_n_tokens"] == sum(len(s["token_ids"]) for s in [*own, *measured])
    assert settled["score_agreement_n"] > 0
    assert len(read_jsonl(run_dir / SETTLED_LOG)) == 1
