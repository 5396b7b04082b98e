"""`search:` end to end on the fake runtime (real processes, HTTP, run directory): a landscape
of configs of different speeds with a planted fast-but-wrong one; the grid measures it fastest,
neither a search nor `sweeper best` returns it; a `tpe` study stays within its `stop` restarts and
`--resume` continues it without measuring anything twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.analysis.best import best_of
from sweeper.results.reader import read_run
from sweeper.search.driver import SEARCH_LOG, STUDY_FILE
from sweeper.spec.search import ObjectiveSpec
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

#: Seconds per token: b16 is fastest of the correct ones, b8-k2 is faster still and wrong.
DELAYS = {
    "budget=8,topk=2": 0.002,
    "budget=16,topk=2": 0.004,
    "budget=16": 0.008,
    "budget=8": 0.012,
    "budget=4": 0.016,
    "budget=2": 0.02,
}
GRID = {"budget": [2, 4, 8, 16], "topk": [1, 2], "block_size": [4], "cuda_graph": [False]}
WRONG, BEST = "b8 k2 bs4", "b16 k2 bs4"


def _spec(tmp: Path, port: int, search: dict | None, name: str) -> Path:
    env = fake_runtime_env(
        tmp,
        {
            "FAKE_DELAYS": json.dumps(DELAYS),
            "FAKE_WRONG_TOKENS": "1",
            "FAKE_WHEN": "budget=8,topk=2",
            "FAKE_START_DELAY": "0.1",
        },
    )
    extra: dict = {"grid": {**GRID, "temperature": [0.0]}}
    if search is not None:
        extra["search"] = search
    return write_spec(
        tmp, port, fake_env=env, name=name, prompts=2, max_tokens=12, repeats=1, extra=extra
    )


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sweeper.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _last_line(out: str) -> Path:
    return Path(out.strip().splitlines()[-1])


def test_grid_shows_the_wrong_config_fastest_but_best_never_returns_it(
    tmp_path: Path, port: int
) -> None:
    spec = _spec(tmp_path, port, {"strategy": "grid"}, "grid")
    done = _run("run", str(spec), "--results", str(tmp_path / "r"), "--plain")
    assert done.returncode == 4, done.stderr  # a determinism violation: the planted config
    run = _last_line(done.stdout)
    points = read_run(run).points
    assert points is not None
    spec_points = points[points["mode"] == "speculative"]
    fastest = spec_points.sort_values("output_tok_s").iloc[-1]
    assert (fastest["budget"], fastest["topk"], fastest["determinism"]) == (8, 2, "diverged")
    found = best_of(points.to_dict("records"), ObjectiveSpec())
    assert found is not None and found[0] == BEST
    best = _run("best", str(run))
    assert best.returncode == 0, best.stderr
    winners = [line for line in best.stdout.splitlines() if line.startswith("t0-c1")]
    assert winners and BEST in winners[0] and WRONG not in winners[0]
    assert f"{WRONG}: infeasible (determinism diverged)" in best.stdout
    search = json.loads((run / SEARCH_LOG).read_text())
    assert len(search["trials"]) == 8 and search["stopped_by"].startswith("the strategy")


def test_tpe_keeps_its_stop_and_resume_continues_the_study(tmp_path: Path, port: int) -> None:
    search = {"strategy": "tpe", "stop": {"restarts": 3}, "seed": 3, "startup_trials": 2}
    spec = _spec(tmp_path, port, search, "tpe")
    dry = _run("run", str(spec), "--dry-run")
    assert "stop: 3 restarts of the grid's 9 (33%)" in dry.stdout, dry.stdout
    first = _run("run", str(spec), "--results", str(tmp_path / "r"), "--plain")
    assert first.returncode in (0, 4), first.stderr[-3000:]
    run = _last_line(first.stdout)
    points = read_run(run).points
    assert points is not None and points["server_config_id"].nunique() == 3  # AR + 2 trials
    # A later stop on the same run: the study resumes from its journal, nothing is redone,
    # even after a kill mid-write left the journal's last line torn (issue 28 #10).
    with (run / STUDY_FILE).open("ab") as journal:
        journal.write(b'{"op_code": 5, "worker_id": "x", "trial_')
    search["stop"] = {"restarts": 6}
    spec = _spec(tmp_path, port, search, "tpe")
    again = _run("run", str(spec), "--resume", str(run), "--plain")
    assert again.returncode in (0, 4), again.stderr[-3000:] + again.stdout[-1000:]
    assert "search.optuna.jsonl: cut a torn last line" in again.stderr
    points = read_run(run).points
    assert points is not None
    assert points["server_config_id"].nunique() == 6
    assert not points["point_id"].duplicated().any()
    log = json.loads((run / SEARCH_LOG).read_text())
    assert log["stopped_by"] == "search.stop: 6 restarts"
    # The dry run named the configs the study started with.
    named = dry.stdout.split("candidates: ")[1].split(" (then")[0].split(", ")
    assert [t["label"] for t in log["trials"][:2]] == named
    assert len({t["label"] for t in log["trials"]}) == 5
    assert (run / STUDY_FILE).stat().st_size > 0
    found = best_of(points.to_dict("records"), ObjectiveSpec())
    assert found is not None and found[0] != WRONG


def test_halving_restarts_the_best_on_fresh_rungs(tmp_path: Path, port: int) -> None:
    """Successive halving live: 8 configs once (the wrong one infeasible), the best 4 of the 7
    again, then 2, then 1; a rung's restart is a point of its own (`-rs<k>`), compared with the
    plan's AR baseline."""
    search = {"strategy": "halving", "eta": 2, "seed": 0}
    spec = _spec(tmp_path, port, search, "halving")
    plan = _run("plan", str(spec), "--json")
    promised = json.loads(plan.stdout)
    done = _run("run", str(spec), "--results", str(tmp_path / "r"), "--plain")
    assert done.returncode == 4, done.stderr[-3000:]  # the planted config's violation
    run = _last_line(done.stdout)
    points = read_run(run).points
    # The plan is a promise (issue 28 #5): its restarts and points bound what the run did.
    assert points is not None and points["point_id"].nunique() <= promised["n_points"]
    assert points.groupby(["server_config_id", "restart"]).ngroups <= promised["restarts"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["points_done"] <= manifest["points_total"] == promised["n_points"]
    assert points is not None and not points["point_id"].duplicated().any()
    rungs = points[points["mode"] == "speculative"].groupby("restart")["server_config_id"].nunique()
    assert list(rungs) == [8, 4, 2, 1]
    last = points[points["restart"] == 3]
    assert set(last["budget"]) == {16} and set(last["topk"]) == {2}  # the fastest correct one
    assert set(last["point_id"].str.contains("-rs3-")) == {True}
    assert last["speedup"].notna().all()  # compared with the AR baseline of the plan
    best = _run("best", str(run))
    level = best.stdout.splitlines()[1]  # the winner, or the first two inside the noise
    assert f"{BEST} " in level and "n=4" in level.split(BEST)[1][:60], best.stdout
