"""`sweeper bisect` on a 16-commit history of the real bundled runtime (tiny-random, CPU), one
commit of which plants a fault of these tests' own (the tree rows' mask stops one column short
of the committed prefix; not one of mask.py's `_FAULTS`): found in at most ceil(log2 16) + 2
measured commits with its evidence, even when the bisect is killed after two steps and resumed,
and no commit is measured twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from sweeper.bisect.state import STATE_FILE
from sweeper.services.runtime_package import runtime_source_hash
from tests.sweeper.bisecting.bisect_helpers import (
    bisect_argv,
    bisect_spec,
    measured_runs,
    run_bisect,
    state_of,
)
from tests.sweeper.bisecting.histories import runtime_history

pytestmark = pytest.mark.slow


def test_planted_fault_found_through_a_kill_and_a_resume(tmp_path: Path, port: int) -> None:
    shas = runtime_history(tmp_path / "repo", 16, events={11: "fault"})
    spec = bisect_spec(tmp_path, port, tmp_path / "repo", fake=False)
    results = tmp_path / "results"
    argv = bisect_argv(spec, shas[0], "main", results)
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115 (closed below)
    first = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    state_files = lambda: list((results / "bisect").glob(f"*/{STATE_FILE}"))  # noqa: E731
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and first.poll() is None:
        found = state_files()
        if found and len(state_of(found[0].parent).steps) >= 2:
            break
        time.sleep(0.5)
    # Killed as a terminal or a scheduler stops it: SIGTERM, a later commit in flight. A step
    # may be recorded between the poll and the signal, so at least 2, and still no answer.
    os.kill(first.pid, signal.SIGTERM)
    assert first.wait(timeout=120) == 130, (tmp_path / "first.log").read_text()[-3000:]
    log.close()
    directory = state_files()[0].parent
    assert len(state_of(directory).steps) >= 2 and state_of(directory).answer is None

    code, resumed, stderr = run_bisect(spec, shas[0], "main", results, "--resume")
    assert code == 0, stderr[-3000:]
    assert resumed == directory
    state = state_of(directory)
    assert state.answer is not None and state.answer.culprits == [shas[11]]
    assert "change 11: tidy the verify mask" in state.answer.summary
    (evidence,) = state.answer.evidence
    assert evidence.determinism in ("diverged", "garbled") and "at output token" in evidence.detail
    assert "ddtree_runtime/algo/mask.py" in state.answer.show_stat
    assert len(state.steps) <= 4 + 2  # ceil(log2 16) + both ends
    # The two steps before the kill were read back, not measured again ...
    assert "good end" in stderr and "(measured before:" in stderr
    shas_measured = [s.sha for s in state.steps]
    assert len(set(shas_measured)) == len(shas_measured)
    # ... and the step cut by the kill was resumed into its own run: one run per commit, whose
    # records hold each point once.
    for step, runs in measured_runs(directory).items():
        assert len(runs) == 1, (step, runs)
        points = pd.read_parquet(runs[0] / "points.parquet")
        assert points.point_id.is_unique and (points.status == "ok").all()
    # Each step's server ran exactly the step's tree, proven by its source hash.
    for record in state.steps:
        manifest = json.loads((Path(record.runs[0]) / "manifest.json").read_text())
        tree = Path(manifest["spec"]["runtime"]["package"])
        assert tree.parent.name == record.sha[:12]
        reported = manifest["hosts"]["local"]["reported_source_hash"]
        assert (
            reported
            == manifest["runtime_source_hash"]
            == runtime_source_hash(tree / "ddtree_runtime")
        )
