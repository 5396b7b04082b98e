"""The run store: append-only records survive torn writes; only completed attempts count."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from sweeper.results import store as store_module
from sweeper.results.reader import POINTS_LOG, REQUESTS_LOG, all_runs, latest_run
from sweeper.results.records import PointRecord, RequestRecord
from sweeper.results.store import RunStore


def _store(root: Path) -> RunStore:
    return RunStore.create(
        root,
        {"sweep": "s", "sweeper_version": "0", "spec": {"name": "s"}, "runtime_source_hash": "h"},
    )


def _req(point: str, attempt: str, prompt: str, repeat: int = 0) -> RequestRecord:
    return RequestRecord(
        run_id="r",
        host="local",
        point_id=point,
        attempt=attempt,
        server_config_id="sc",
        engine="ddtree_runtime",
        mode="ar",
        prompt_id=prompt,
        repeat=repeat,
        concurrency=1,
        temperature=0.0,
        max_tokens=4,
        token_ids=[1, 2],
        itls=[0.1],
        top2_margins=[1.0, float("nan")],
    )


def _point(point: str, attempt: str) -> PointRecord:
    return PointRecord(
        run_id="r",
        host="local",
        point_id=point,
        attempt=attempt,
        server_config_id="sc",
        engine="ddtree_runtime",
        mode="ar",
        temperature=0.0,
        max_tokens=4,
        concurrency=1,
        status="ok",
        started_at="t0",
        finished_at="t1",
        log_tail="line1\nline2, with comma",
    )


def test_only_completed_attempts_count(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append_point(_point("p1", "a1"), [_req("p1", "a1", "x"), _req("p1", "a1", "y")])
    # An attempt of p2 killed after its requests but before its point line ...
    from sweeper.results.store import _append_lines

    _append_lines(store.dir / REQUESTS_LOG, [_req("p2", "dead", "x").model_dump()])
    # ... and a torn half line at the end of both logs.
    with open(store.dir / REQUESTS_LOG, "ab") as fh:
        fh.write(b'{"point_id": "p2", "att')
    with open(store.dir / POINTS_LOG, "ab") as fh:
        fh.write(b'{"point_id": "p2"')
    reopened = RunStore.open(store.dir)
    assert set(reopened.points()) == {"p1"}
    assert [r["prompt_id"] for r in reopened.requests()] == ["x", "y"]
    # The redo of p2 appends cleanly after the cut torn tail.
    reopened.append_point(_point("p2", "a2"), [_req("p2", "a2", "x")])
    rows = reopened.requests()
    assert [(r["point_id"], r["attempt"]) for r in rows] == [
        ("p1", "a1"),
        ("p1", "a1"),
        ("p2", "a2"),
    ]
    reopened.consolidate()
    points = pd.read_parquet(store.dir / "points.parquet")
    requests = pd.read_parquet(store.dir / "requests.parquet")
    csv = pd.read_csv(store.dir / "points.csv")
    assert sorted(points.point_id) == ["p1", "p2"] == sorted(csv.point_id)
    assert len(requests) == 3 and list(requests.token_ids[0]) == [1, 2]
    assert csv.log_tail[0] == "line1\nline2, with comma"


def test_empty_run_consolidates(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.consolidate()
    assert (store.dir / "points.parquet").exists() and (store.dir / "points.csv").exists()


def test_latest_and_list(tmp_path: Path) -> None:
    a = _store(tmp_path)
    b = _store(tmp_path)
    assert latest_run(tmp_path, "s") == max(a.dir, b.dir)
    assert sorted(r.manifest.run_id for r in all_runs(tmp_path) if r.manifest) == sorted(
        [a.run_id, b.run_id]
    )
    assert latest_run(tmp_path, "nope") is None
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        RunStore.open(tmp_path)


def test_files_follow_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        store = _store(tmp_path)
        store.append_point(_point("p1", "a1"), [_req("p1", "a1", "x")])
        store.consolidate()
        log = store.write_log("p1", "text")
    finally:
        os.umask(previous)
    for path in (store.dir / "manifest.json", store.dir / "points.parquet", log):
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path  # not mkstemp's 0600
    assert stat.S_IMODE((store.dir / "points.jsonl").stat().st_mode) == 0o640


def test_a_run_that_dies_is_marked_failed_even_when_the_disk_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.begin(2)
    store.append_point(_point("p1", "a1"), [_req("p1", "a1", "x")])
    store.consolidate()
    real = store_module.atomic_write
    full = {"left": 1}

    def atomic_write(path: Path, write: object) -> None:
        # The disk is full until the views are gone (they are rebuilt from the records).
        if (store.dir / "points.parquet").exists() and full["left"]:
            full["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, write)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "atomic_write", atomic_write)
    store.mark_failed("No space left on device", 5)
    saved = RunStore.open(store.dir).manifest
    assert (saved.status, saved.exit_code, saved.points_done) == ("failed", 5, 1)
    assert saved.error == "No space left on device"
    assert not (store.dir / "points.parquet").exists()
    assert [p for p in RunStore.open(store.dir).points()] == ["p1"]  # the records are intact
