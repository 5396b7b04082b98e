"""Scored samples and settled verdicts on disk (`scores.jsonl`, `settled.jsonl`): a score counts
only for its point's completed attempt, once per output and scorer (a resumed run that scores
again adds nothing; a failed score is replaced by a later success); a verdict settled after the
point line is what every reader of the run sees, for that attempt only; a torn last line is cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.results.reader import SCORES_LOG, SETTLED_LOG, Run
from sweeper.results.records import PointRecord
from sweeper.results.scores import PositionScore, ScoreRecord, SettledRecord
from sweeper.results.store import RunStore


def _store(root: Path) -> RunStore:
    manifest = {"sweep": "s", "sweeper_version": "0", "spec": {"name": "s"}}
    return RunStore.create(root, {**manifest, "runtime_source_hash": "h"})


def _point(point: str, attempt: str, **columns: Any) -> PointRecord:
    return PointRecord(
        run_id="r", host="local", point_id=point, attempt=attempt, server_config_id="sc",
        engine="sglang", mode="speculative", temperature=0.7, max_tokens=4, concurrency=1,
        status="ok", started_at="t0", finished_at="t1", **columns,
    )  # fmt: skip


def _score(point: str, attempt: str, index: int, scorer: str = "self", **more: Any) -> ScoreRecord:
    positions = [] if more.get("error") else [PositionScore(token=5, logprob=-0.5, top=[(5, -0.5)])]
    return ScoreRecord(
        run_id="r", host="local", point_id=point, attempt=attempt, role="test", prompt_id="a",
        index=index, scorer=scorer, basis="topk", temperature=0.7, order=["temperature"], k=1,
        positions=positions, **more,
    )  # fmt: skip


def test_scores_count_for_completed_attempts_once_per_output_and_scorer(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # An attempt killed before its point line: its scores never count.
    store.append_scores([_score("p", "dead", 0)])
    store.commit_point(
        _point("p", "live"), [], [], [_score("p", "live", 0), _score("p", "live", 1)]
    )
    # A resumed run scores output 0 again (and 1 by another server), output 2 fails then works.
    store.append_scores([_score("p", "live", 0), _score("p", "live", 1, scorer="ar-rs1")])
    store.append_scores([_score("p", "live", 2, error="HTTP 503: busy")])
    store.append_scores([_score("p", "live", 2)])
    rows = store.scores()
    keys = sorted((r["index"], r["scorer"], r["error"]) for r in rows)
    assert keys == [(0, "self", None), (1, "ar-rs1", None), (1, "self", None), (2, "self", None)]
    assert {r["attempt"] for r in rows} == {"live"}
    assert sorted((r["index"], r["scorer"]) for r in Run(store.dir).scores) == sorted(
        (k[0], k[1]) for k in keys
    )
    # Nothing is dropped on disk: every line is still there.
    assert len((store.dir / SCORES_LOG).read_text().splitlines()) == 7


def test_a_settled_verdict_is_what_every_reader_sees_for_its_attempt(tmp_path: Path) -> None:
    store = _store(tmp_path)
    pending = {"determinism": "unproven", "scored_pending": True, "scored_by": "ar-cg0-rs1"}
    store.commit_point(_point("p", "a1", **pending), [])
    settled: dict[str, Any] = {"determinism": "shifted", "scored_pending": False, "scored_p": 0.001}
    other: dict[str, Any] = {"determinism": "exact"}
    store.settle([SettledRecord(point_id="p", attempt="other", settled_at="t", **other)])
    store.settle([SettledRecord(point_id="p", attempt="a1", settled_at="t2", **settled)])
    row = store.points()["p"]
    assert (row["determinism"], row["scored_pending"], row["scored_p"]) == ("shifted", False, 0.001)
    # The point line is as it was recorded; the views and the loader carry the settled columns.
    line = pd.read_json(store.dir / "points.jsonl", lines=True).iloc[0]
    assert line["determinism"] == "unproven"
    view = pd.read_parquet(store.dir / "points.parquet").set_index("point_id")
    assert view.loc["p", "determinism"] == "shifted"
    (store.dir / "points.parquet").unlink()
    (store.dir / "points.csv").unlink()
    points = Run(store.dir).points
    assert points is not None and points.set_index("point_id").loc["p", "determinism"] == "shifted"


def test_a_torn_score_or_settled_line_is_cut_on_reopening(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.commit_point(_point("p", "a1"), [], [], [_score("p", "a1", 0)])
    for name in (SCORES_LOG, SETTLED_LOG):
        with open(store.dir / name, "a") as fh:
            fh.write('{"point_id": "p", "att')
    reopened = RunStore.open(store.dir)
    assert [r["index"] for r in reopened.scores()] == [0]
    assert (store.dir / SCORES_LOG).read_text().endswith("\n")
    assert (store.dir / SETTLED_LOG).read_text() == ""
