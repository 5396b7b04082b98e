"""The search driver as the runner drives it, without servers: each step it yields is "measured"
by writing its points' rows into `done` (as the runner records them) before the next is asked
for. `search.stop` in restarts and in hours, resume from the records, the trial log, and halving's
rungs measured longer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sweeper.plan import build_plan
from sweeper.search.driver import SEARCH_LOG, SearchOrder
from sweeper.spec import parse_spec

SPEC = """
name: s
runtime: {{model: tiny-random}}
grid: {{budget: [2, 4, 8], topk: [1, 2], block_size: [4]}}
workload: {{prompts: [{{id: p, text: hi}}], concurrency: [1]}}
search: {search}
"""


def _measure(point: Any) -> dict[str, Any]:
    sc = point.server_config
    budget = sc.params.get("budget", 0)
    return {
        "server_config_id": sc.id,
        "restart": sc.restart,
        "mode": sc.mode,
        "budget": budget if sc.mode != "ar" else None,
        "topk": sc.params.get("topk"),
        "block_size": sc.params.get("block_size"),
        "temperature": 0.0,
        "max_tokens": 64,
        "concurrency": 1,
        "status": "ok",
        "determinism": "diverged" if budget == 8 and sc.params.get("topk") == 2 else "exact",
        "output_tok_s": 10.0 + budget + sc.params.get("topk", 0),
    }


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _drive(
    search: str,
    run_dir: Path,
    done: dict[str, Any],
    clock: Clock | None = None,
    lengths: dict[str, int] | None = None,
) -> list:
    plan = build_plan(parse_spec(SPEC.format(search=search)))
    order = SearchOrder(plan, run_dir, clock or Clock())
    started = []
    for work in order(plan.hosts[0], done):
        started.append(work.step.server_config.label)
        for point in work.points:
            done[point.point_id] = _measure(point)
            if lengths is not None:
                lengths[point.point_id] = point.length
        if clock is not None:
            clock.now += 600  # ten minutes a restart
    return started


def test_restart_stop_then_resume_with_a_larger_one(tmp_path: Path) -> None:
    done: dict[str, Any] = {}
    first = _drive("{strategy: random, seed: 2, stop: {restarts: 3}}", tmp_path, done)
    assert first[0] == "ar-cg0" and len(first) == 3
    log = json.loads((tmp_path / SEARCH_LOG).read_text())
    assert log["stopped_by"] == "search.stop: 3 restarts" and len(log["trials"]) == 2
    again = _drive("{strategy: random, seed: 2, stop: {restarts: 5}}", tmp_path, done)
    assert len(again) == 2 and not set(again) & set(first)  # nothing measured twice
    assert len({r["server_config_id"] for r in done.values()}) == 5


def test_hours_stop_and_the_wrong_config_is_logged_infeasible(tmp_path: Path) -> None:
    done: dict[str, Any] = {}
    started = _drive("{strategy: grid, stop: {hours: 0.5}}", tmp_path, done, Clock())
    assert len(started) == 3  # 10 min each: the third ends at 30 min, so no fourth begins
    log = json.loads((tmp_path / SEARCH_LOG).read_text())
    assert log["stopped_by"] == "search.stop: 0.5 hours" and log["spent_s"] == 1800
    (tmp_path / "all").mkdir()
    everything = _drive("{strategy: grid}", tmp_path / "all", {}, None)
    assert len(everything) == 1 + 6  # no stop: AR, then every config
    log = json.loads((tmp_path / "all" / SEARCH_LOG).read_text())
    wrong = [t for t in log["trials"] if t["label"] == "b8-k2-bs4-cg0"]
    assert wrong[0]["state"] == "infeasible" and wrong[0]["value"] == 20.0


def test_halving_rungs_measure_eta_times_longer(tmp_path: Path) -> None:
    done: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    started = _drive("{strategy: halving, eta: 2}", tmp_path, done, lengths=lengths)
    # AR, 6 configs once (5 feasible), then 3 -> 2 -> 1 on fresh restarts
    assert len(started) == 1 + 6 + 3 + 2 + 1
    by_rung: dict[int, set[int]] = {}
    for point_id, length in lengths.items():
        by_rung.setdefault(done[point_id]["restart"], set()).add(length)
    assert by_rung == {0: {1}, 1: {2}, 2: {4}, 3: {8}}  # eta^rung times the workload's requests


def test_baseline_checks_between_trials_and_a_drifted_speedup_is_withheld(tmp_path: Path) -> None:
    spec = SPEC.format(search="{strategy: grid, objective: {column: speedup}}")
    plan = build_plan(parse_spec(spec + "repeats: {baseline_every: 2}\n"))
    order = SearchOrder(plan, tmp_path, Clock())
    done: dict[str, Any] = {}
    started = []
    for work in order(plan.hosts[0], done):
        started.append(work.step.server_config.label)
        for point in work.points:
            row = _measure(point)
            if point.server_config.mode == "ar":  # the machine slows down by half at check 2
                row["output_tok_s"] = 5.0 if point.server_config.restart >= 2 else 10.0
            else:
                row["speedup"] = row["output_tok_s"] / 10.0
            done[point.point_id] = row
    assert started == [
        "ar-cg0", "b2-k1-bs4-cg0", "b2-k2-bs4-cg0", "ar-cg0-rs1",
        "b4-k1-bs4-cg0", "b4-k2-bs4-cg0", "ar-cg0-rs2",
        "b8-k1-bs4-cg0", "b8-k2-bs4-cg0", "ar-cg0-rs3",
    ]  # fmt: skip
    trials = {t["label"]: t for t in json.loads((tmp_path / SEARCH_LOG).read_text())["trials"]}
    assert trials["b4-k2-bs4-cg0"]["state"] == "ok"  # scored before the drift was seen
    assert trials["b8-k1-bs4-cg0"]["state"] == "failed"
    assert "drifted" in trials["b8-k1-bs4-cg0"]["reason"]


def test_an_impossible_speedup_is_withheld_with_its_numbers(tmp_path: Path) -> None:
    spec = SPEC.format(search="{strategy: grid, objective: {column: speedup}}")
    plan = build_plan(parse_spec(spec))
    order = SearchOrder(plan, tmp_path, Clock())
    done: dict[str, Any] = {}
    for work in order(plan.hosts[0], done):
        for point in work.points:
            row = _measure(point)
            if point.server_config.mode != "ar":
                row["speedup"] = row["output_tok_s"] / 10.0
                # b4 k1 reads 1.5x at tau 1.2: its AR baseline ran slower than its steps allow
                row["tau"] = 1.2 if row["budget"] == 4 and row["topk"] == 1 else 3.0
            done[point.point_id] = row
    trials = {t["label"]: t for t in json.loads((tmp_path / SEARCH_LOG).read_text())["trials"]}
    assert trials["b4-k1-bs4-cg0"]["state"] == "failed"
    assert trials["b4-k1-bs4-cg0"]["reason"].startswith(
        "withheld: an impossible speedup (above tau): speedup 1.50x above tau 1.20: "
    )
    assert trials["b4-k2-bs4-cg0"]["state"] == "ok"
