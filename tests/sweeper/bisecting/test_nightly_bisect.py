"""`sweeper nightly --bisect`: a run's manifest records the runtime's git commit; when the next
nightly regresses (determinism broken) on a later commit, the nightly bisects between the two
runs' commits and its summary line and report name the first bad commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sweeper.bisecting.bisect_helpers import bisect_spec
from tests.sweeper.bisecting.histories import FAKE_BASE, FAKE_EVENTS, git, runtime_history

pytestmark = pytest.mark.slow


def _nightly(spec: Path, results: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "sweeper.cli", "nightly", str(spec), "--results", str(results)]
    return subprocess.run(
        [*argv, "--bisect"], capture_output=True, text=True, timeout=300, check=False
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
