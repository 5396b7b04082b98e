"""Nothing recorded is dropped: a damaged record line comes back from the views, a damaged view
from the records; read commands do it in memory, only `repair` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sweeper.results.reader import POINTS_LOG, REQUESTS_LOG, read_run
from sweeper.results.recover import recover
from sweeper.results.repair import repair, repaired
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
    assert kept == [{"file": REQUESTS_LOG, "line": 3, "text": before.splitlines()[2].decode()}]
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
