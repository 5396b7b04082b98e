"""`sweeper bisect` over an engine run from a git checkout (`runtime.source`): a SGLang fork's
history, on the local host. Each step's commit is written beside the checkout (never touching
it), built by the spec's install command (a commit whose build fails is skipped, not blamed),
and put first on the server's PYTHONPATH, which the /proc identity proof checks. The fork's
server is the fake SGLang (tests/sweeper/fake_sglang.py): this checks the sweeper's checkout,
build and proof, not SGLang itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.sweeper.bisecting.bisect_helpers import run_bisect, state_of
from tests.sweeper.bisecting.histories import git, sglang_history

pytestmark = pytest.mark.slow


def _spec(tmp: Path, port: int, repo: Path) -> Path:
    spec = {
        "name": "bis",
        "hosts": ["local"],
        "runtime": {
            "engine": "sglang",
            "preset": "sglang-ddtree",
            "model": "fake-target",
            "draft": "fake-draft",
            "port": port,
            "ready_timeout_s": 30,
            "env": {"PYTHONSAFEPATH": "1", "FAKE_START_DELAY": "0.2"},
            "extra_args": ["--page-size", "1"],
            "source": {"repo": str(repo), "path": "python", "install": "sh build.sh"},
        },
        "grid": {"budget": [16], "topk": [4], "block_size": [8], "cuda_graph": [False]},
        "baseline": True,
        "workload": {
            "api": "completions",
            "prompts": [{"id": "p0", "text": "prompt number 0 about the sea"}],
            "max_tokens": 8,
            "repeats": 1,
            "concurrency": [1],
            "warmup": 0,
        },
    }
    path = tmp / "bis.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_forks_history_is_bisected_from_its_checkout(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = tmp_path / "sglang"
    shas = sglang_history(repo, 6, events={3: "broken", 5: "fault"})
    (repo / "python" / "sglang" / "version.py").write_text("CHANGE = 'mine'\n")  # uncommitted
    before = git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")
    spec = _spec(tmp_path, port, repo)
    code, directory, stderr = run_bisect(spec, shas[0], shas[-1], tmp_path / "results")
    assert code == 0, stderr[-3000:]
    state = state_of(directory)
    assert state.answer is not None and state.answer.culprits == [shas[5]]
    assert "reuse the draft tree's ids" in state.answer.summary
    broken = state.step_of(shas[3])
    assert broken is not None and broken.outcome == "skip"
    assert "planted: the build fails" in broken.reason
    assert len(state.steps) <= 2 + 3 + 1  # both ends + ceil(log2 6) + the skip
    # The user's checkout is as it was: same HEAD, same uncommitted edit.
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")) == before
    sources = tmp_path / "cache" / "ddtree-sweeper" / "sources"
    for step in state.steps:
        tree = sources / step.sha
        assert (tree / "python" / "sglang" / "launch_server.py").exists()
        assert (tree / ".complete").exists() == (step.outcome != "skip")
        if step.outcome == "skip":
            continue
        manifest = json.loads((Path(step.runs[0]) / "manifest.json").read_text())
        assert manifest["runtime_commit"] == step.sha
        assert manifest["spec"]["runtime"]["source"]["rev"] == step.sha
        # every server proven to run with the step's tree first on its path: PYTHONPATH is in
        # the launched environment the /proc proof checks
        for identity in manifest["identities"].values():
            assert any("runs the requested argv and environment" in p for p in identity["proven"])
        log = next((Path(step.runs[0]) / "service" / "local").glob("runtime-*.log")).read_text()
        assert "fake sglang" in log
    assert os.environ["XDG_CACHE_HOME"] == str(tmp_path / "cache")
