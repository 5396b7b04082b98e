"""`sweeper nightly --bisect`: a run's manifest records the runtime's git commit; when the next
nightly regresses (determinism broken) on a later commit, the nightly bisects between the two
runs' commits and its summary line and report name the first bad commit. The same from the
history alone: a change point (a verdict change) found in the history database, with no earlier
run directory on disk to compare with, is bisected over the commit range the history names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.results.history import HISTORY_ENV, history_frame
from tests.sweeper.bisecting.bisect_helpers import bisect_spec
from tests.sweeper.bisecting.histories import FAKE_BASE, FAKE_EVENTS, git, runtime_history

pytestmark = pytest.mark.slow


def _nightly(
    spec: Path, results: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "sweeper.cli", "nightly", str(spec), "--results", str(results)]
    return subprocess.run(
        [*argv, "--bisect"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_a_nightly_regression_is_bisected_to_its_commit(tmp_path: Path, port: int) -> None:
    repo = tmp_path / "repo"
    shas = runtime_history(repo, 2, fake=True)
    spec = bisect_spec(tmp_path, port, repo, fake=True)
    results = tmp_path / "results"
    first = _nightly(spec, results)
    assert first.returncode == 0, first.stderr[-2000:] + first.stdout
    # Two more commits land: the first breaks exactness, the second is routine.
    main = repo / "ddtree_runtime" / "__main__.py"
    main.write_text(main.read_text().replace(FAKE_BASE, FAKE_BASE + FAKE_EVENTS["fault"], 1))
    git(repo, "commit", "-qam", "speed up drafting")
    fault = git(repo, "rev-parse", "HEAD")
    (repo / "ddtree_runtime" / "changelog.py").write_text("CHANGE = 99\n")
    git(repo, "commit", "-qam", "routine edit")
    second = _nightly(spec, results)
    assert second.returncode == 1, second.stderr[-2000:] + second.stdout  # a regression
    line = second.stdout.strip()
    assert "REGRESSION" in line and f"bisect: first bad commit: {fault}" in line
    assert "'speed up drafting'" in line
    runs = sorted(p for p in (results / "bis").iterdir() if (p / "manifest.json").exists())
    commits = [json.loads((r / "manifest.json").read_text())["runtime_commit"] for r in runs]
    assert commits == [shas[-1], git(repo, "rev-parse", "HEAD")]
    report = (runs[-1] / "report.html").read_text()
    assert "Bisected:" in report and fault in report


def test_a_change_point_in_the_history_is_bisected_over_the_commits_it_names(
    tmp_path: Path, port: int
) -> None:
    """Each night writes its run into its own results root, so no night finds an earlier run on
    disk to compare with: only the shared history database (`SWEEPER_HISTORY_URL`) knows the
    nights before. The night the runtime breaks, the history's verdict change (exact ->
    diverged) is the alarm, and its commit range, read from the history, is what is walked."""
    repo = tmp_path / "repo"
    shas = runtime_history(repo, 4, fake=True)
    spec = bisect_spec(tmp_path, port, repo, fake=True)
    history = {HISTORY_ENV: str(tmp_path / "history.sqlite")}
    git(repo, "checkout", "-q", shas[1])  # the last good night ran an older commit
    good = _nightly(spec, tmp_path / "night1", history)
    assert good.returncode == 0, good.stderr[-2000:] + good.stdout
    assert "CHANGE POINT" not in good.stdout
    git(repo, "checkout", "-q", "main")
    main = repo / "ddtree_runtime" / "__main__.py"
    main.write_text(main.read_text().replace(FAKE_BASE, FAKE_BASE + FAKE_EVENTS["fault"], 1))
    git(repo, "commit", "-qam", "speed up drafting")
    fault = git(repo, "rev-parse", "HEAD")
    bad = _nightly(spec, tmp_path / "night2", history)
    assert bad.returncode == 1, bad.stderr[-2000:] + bad.stdout
    line = bad.stdout.strip()
    assert "compared with" not in bad.stderr  # nothing on disk to compare with
    assert "CHANGE POINT" in line and "verdict exact -> diverged" in line
    assert f"runtime {shas[1][:10]}..{fault[:10]}" in line
    assert f"bisect: first bad commit: {fault}" in line and "'speed up drafting'" in line
    # The walk covered the history's range: the commits between the two nights' and no other.
    walked = {step.name for step in (tmp_path / "night2" / "bisect").glob("*/steps/*")}
    assert walked <= {sha[:12] for sha in (*shas[1:], fault)} and fault[:12] in walked
    # The history holds the two nights, not the bisect's measurements of old commits.
    frame = history_frame(history[HISTORY_ENV])
    assert list(frame.drop_duplicates("run_id").runtime_commit) == [shas[1], fault]
    assert len(frame) == 4  # each night: the AR baseline and the speculative point
