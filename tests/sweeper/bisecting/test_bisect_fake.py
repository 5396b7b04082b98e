"""`sweeper bisect` end to end on histories of the fake runtime's shim package (cheap starts):
a commit that cannot start is skipped and reported, never blamed; a slow commit is found by
`--metric output_tok_s` with every step's restart-noise interval printed. (Ends not as claimed,
and the dry run: `test_walk.py` and `test_bisect_cli.py`, without starting servers.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.sweeper.bisecting.bisect_helpers import bisect_spec, measured_runs, run_bisect, state_of
from tests.sweeper.bisecting.histories import runtime_history

pytestmark = pytest.mark.slow


def test_a_commit_that_cannot_start_is_skipped_not_blamed(tmp_path: Path, port: int) -> None:
    # 8 commits: commit 4 does not import (repaired by 5), commit 6 plants the fault. The
    # search's first step lands on 4: skipped, stepped around, reported, never the answer.
    shas = runtime_history(tmp_path / "repo", 8, events={4: "broken", 6: "fault"}, fake=True)
    spec = bisect_spec(tmp_path, port, tmp_path / "repo", fake=True)
    code, directory, stderr = run_bisect(spec, shas[0], shas[-1], tmp_path / "results")
    assert code == 0, stderr[-3000:]
    state = state_of(directory)
    assert state.answer is not None and state.answer.culprits == [shas[6]]
    outcomes = {s.sha: s.outcome for s in state.steps}
    assert outcomes[shas[4]] == "skip"
    skipped = state.step_of(shas[4])
    assert skipped is not None and "before becoming ready" in skipped.reason
    assert f"{shas[4][:10]}: skip: none of the 1 chosen point(s) ran" in stderr
    assert f"first bad commit: {shas[6]} 'change 6: tidy the verify mask'" in stderr
    assert "diverged at output token 2" in state.answer.summary + " ".join(
        e.detail for e in state.answer.evidence
    )
    assert "ddtree_runtime/__main__.py" in state.answer.show_stat
    # Every commit measured once, each an ordinary run directory of its own.
    assert len(outcomes) == len(state.steps) <= 2 + 3 + 1  # ends + log2(8) + the one skip
    runs = measured_runs(directory)
    assert all(len(r) == 1 for r in runs.values()) and len(runs) == len(state.steps)
    manifest = json.loads((runs[shas[6][:12]][0] / "manifest.json").read_text())
    assert manifest["spec"]["runtime"]["package"].endswith(f"steps/{shas[6][:12]}/tree")
    assert manifest["spec"]["only"] == ["local-b8-k4-bs4-cg0-t0-c1"]


@pytest.mark.quiet  # a speed bisect judges only restarts measured on a quiet host
def test_a_slow_commit_is_found_with_intervals(tmp_path: Path, port: int) -> None:
    shas = runtime_history(tmp_path / "repo", 4, events={3: "slow"}, fake=True)
    spec = bisect_spec(tmp_path, port, tmp_path / "repo", fake=True, baseline=False)
    more = ("--metric", "output_tok_s", "--threshold", "20%")
    code, directory, stderr = run_bisect(spec, shas[0], shas[-1], tmp_path / "results", *more)
    assert code == 0, stderr[-3000:]
    state = state_of(directory)
    assert state.answer is not None and state.answer.culprits == [shas[3]]
    assert state.restarts == 3 and len(state.steps) <= 4
    for step in state.steps:  # every step's interval over its 3 restarts a measurement, printed
        (point,) = step.points
        # (a step whose interval was too wide, or undecided, is measured again: 3 more)
        assert point.n in (3, 6, 9) and point.mean is not None
        assert point.low is not None and point.high is not None
        assert point.low <= point.mean <= point.high
        line = rf"{step.sha[:10]}: (good|bad): .*\[[0-9.]+, [0-9.]+\] \(n={point.n}\)"
        assert re.search(line, stderr)
    good, slow = state.step_of(shas[0]), state.step_of(shas[3])
    assert good is not None and slow is not None
    slow_mean, good_mean = slow.points[0].mean, good.points[0].mean
    assert slow_mean is not None and good_mean is not None
    assert slow_mean < 0.8 * good_mean  # the planted delay, measured
