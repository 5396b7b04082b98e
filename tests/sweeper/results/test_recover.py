"""Nothing recorded is dropped: a damaged record line comes back from the views, a damaged view
from the records; read commands do it in memory, only `repair` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.results.reader import POINTS_LOG, REQUESTS_LOG, SCORES_LOG, read_jsonl, read_run
from sweeper.results.records import PointRecord
from sweeper.results.recover import recover
from sweeper.results.repair import repair, repaired
from sweeper.results.scores import PositionScore, ScoreRecord
from tests.sweeper.results.test_store import _point, _req, _store


def _three_points(root: Path) -> Path:
    store = _store(root)
    for point in ("p1", "p2", "p3"):
        store.commit_point(_point(point, "a"), [_req(point, "a", "x"), _req(point, "a", "y")])
    return store.dir


def _damage(path: Path, index: int, keep: int = 40) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[index] = lines[index][:keep] + "\n"
    path.write_text("".join(lines))


def test_a_cut_request_line_comes_back_from_requests_parquet(tmp_path: Path) -> None:
    run_dir = _three_points(tmp_path)
    _damage(run_dir / REQUESTS_LOG, 2)  # p2's first request
    found = recover(run_dir)
    assert [d.line for d in found.damaged] == [3] and found.recovered_ids == ["p2"]
    assert sorted((r["point_id"], r["prompt_id"]) for r in found.requests) == [
        (p, q) for p in ("p1", "p2", "p3") for q in ("x", "y")
    ]
    before = (run_dir / REQUESTS_LOG).read_bytes()
    done = repair(run_dir)
    assert "point p2: restored from the views" in done
    rows = [json.loads(line) for line in (run_dir / REQUESTS_LOG).read_text().splitlines()]
    assert len(rows) == 6 and (run_dir / REQUESTS_LOG).read_bytes() != before
    kept = [json.loads(x) for f in (run_dir / "damaged").iterdir() for x in f.open()]
    text = before.splitlines()[2].decode()
    assert kept == [{"file": REQUESTS_LOG, "line": 3, "text": text, "why": "not JSON"}]
    assert repair(run_dir) == []  # whole again: nothing more to do


def test_a_reader_sees_every_point_and_writes_nothing(tmp_path: Path) -> None:
    run_dir = _three_points(tmp_path)
    _damage(run_dir / POINTS_LOG, 1)
    (run_dir / "requests.parquet").write_bytes(b"PAR1 torn")
    files = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    run = repaired(read_run(run_dir))
    assert run.points is not None and sorted(run.points.point_id) == ["p1", "p2", "p3"]
    assert len(run.requests(["point_id"])) == 6
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == files


def test_a_point_in_no_copy_is_named_and_kept_aside(tmp_path: Path) -> None:
    run_dir = _three_points(tmp_path)
    _damage(run_dir / POINTS_LOG, 2, keep=60)  # the id still readable in the fragment
    for view in ("points.parquet", "points.csv"):
        (run_dir / view).unlink()
    done = repair(run_dir)
    assert "points.jsonl line 3: point p3 is in no other copy (kept aside)" in done
    assert list(pd.read_parquet(run_dir / "points.parquet").point_id) == ["p1", "p2"]
    assert len(list((run_dir / "damaged").iterdir())) == 1


def _budgeted(point: str, budget: int | None) -> PointRecord:
    """A point whose integer `budget` a view holds as a float (null in another row), and whose
    lists a CSV holds as text."""
    extra = {"accepted_hist": [3, 1], "covers_labels": [f"{point}-twin"]} if budget else {}
    return _point(point, "a").model_copy(update={"budget": budget, "mode": "speculative", **extra})


@pytest.mark.parametrize("only_copy", ["points.parquet", "points.csv"])
def test_a_field_of_the_wrong_type_is_a_damaged_line_the_views_hold(
    tmp_path: Path, only_copy: str
) -> None:
    store = _store(tmp_path)
    points = [_budgeted("p1", None), _budgeted("p2", 8), _budgeted("p3", 16)]
    for point in points:
        store.commit_point(point, [_req(point.point_id, "a", "x")])
    run_dir = store.dir
    lines = (run_dir / POINTS_LOG).read_text().splitlines(keepends=True)
    edited = json.loads(lines[1]) | {"budget": "eight", "concurrency": "1"}  # a hand edit
    lines[1] = json.dumps(edited) + "\n"
    (run_dir / POINTS_LOG).write_text("".join(lines))
    other = {"points.parquet": "points.csv", "points.csv": "points.parquet"}[only_copy]
    (run_dir / other).unlink()
    found = recover(run_dir)
    assert [(d.line, d.why) for d in found.damaged] == [
        (2, "field budget: Input should be a valid integer, got 'eight'; also concurrency")
    ]
    run = repaired(read_run(run_dir))  # what every read command reads: no type error
    assert run.points is not None and list(run.points.sort_values("point_id").budget[1:]) == [8, 16]
    done = repair(run_dir)
    assert "point p2: restored from the views" in done
    assert any("points.jsonl line 2: field budget" in line for line in done), done
    kept = [json.loads(x) for f in (run_dir / "damaged").iterdir() for x in f.open()]
    assert [k["text"] for k in kept] == [lines[1].rstrip("\n")] and "budget" in kept[0]["why"]
    restored = {r["point_id"]: r for r in read_jsonl(run_dir / POINTS_LOG)}
    assert PointRecord.model_validate(restored["p2"]) == points[1]  # as it was recorded
    assert repair(run_dir) == []  # the restored line reads as a record: nothing more to do


def test_a_line_lacking_a_field_or_holding_an_undeclared_one_is_a_record(tmp_path: Path) -> None:
    """Runs written before a field existed, and extra grid flags, read as they are; a score's
    pairs (tuples, JSON lists) read as the JSON they are; a wrong type is damage."""
    run_dir = _three_points(tmp_path)
    legacy = json.loads((run_dir / POINTS_LOG).read_text().splitlines()[0])
    del legacy["mode"], legacy["finished_at"]
    legacy |= {"engine": "ddtree", "attention_backend": "flashinfer"}
    (run_dir / POINTS_LOG).write_text(json.dumps(legacy) + "\n")
    assert [r["point_id"] for r in read_jsonl(run_dir / POINTS_LOG)] == ["p1"]
    score = ScoreRecord(
        run_id="r", host="local", point_id="p1", attempt="a", role="test", prompt_id="x",
        index=0, scorer="self", basis="topk", temperature=1.0, order=["top_k"], k=2,
        positions=[PositionScore(token=5, logprob=-0.1, top=[(5, -0.1), (7, -2.5)])],
    )  # fmt: skip
    store = _store(tmp_path / "scored")
    store.append_scores([score])
    with (store.dir / SCORES_LOG).open("a") as log:  # the same score, its index a string
        log.write(json.dumps(score.model_dump() | {"index": "0"}) + "\n")
    rows, damaged = read_jsonl(store.dir / SCORES_LOG), recover(store.dir).damaged
    assert [ScoreRecord.model_validate(r) for r in rows] == [score]
    assert [(d.file, d.line, d.why) for d in damaged] == [
        (SCORES_LOG, 2, "field index: Input should be a valid integer, got '0'")
    ]
