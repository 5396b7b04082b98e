"""Which kept samples a resumed attempt takes over (`RunStore.interrupted_samples`): an
unrecorded point's samples from the stopped attempt that drew the most, never a failed one,
never an attempt that wrote request rows (stopped mid-commit), never a recorded point's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweeper.results.records import PointRecord, RequestRecord, SampleRecord
from sweeper.results.store import RunStore


def _store(root: Path) -> RunStore:
    return RunStore.create(
        root,
        {"sweep": "s", "sweeper_version": "0", "spec": {"name": "s"}, "runtime_source_hash": "h"},
    )


def _key(point: str, attempt: str) -> dict[str, Any]:
    return {"run_id": "r", "host": "local", "point_id": point, "attempt": attempt}


def _sample(point: str, attempt: str, index: int, error: str | None = None) -> SampleRecord:
    return SampleRecord(
        **_key(point, attempt),
        server_config_id="sc",
        mode="speculative",
        temperature=0.7,
        max_tokens=4,
        role="test",
        prompt_id="p0",
        index=index,
        seed=100 + index,
        token_ids=[] if error else [1, 2, 3, 4],
        error=error,
    )


def _request(point: str, attempt: str) -> RequestRecord:
    return RequestRecord(
        **_key(point, attempt),
        server_config_id="sc",
        engine="ddtree_runtime",
        mode="speculative",
        prompt_id="p0",
        repeat=0,
        concurrency=1,
        temperature=0.7,
        max_tokens=4,
    )


def _point(point: str, attempt: str) -> PointRecord:
    return PointRecord(
        **_key(point, attempt),
        server_config_id="sc",
        engine="ddtree_runtime",
        mode="speculative",
        temperature=0.7,
        max_tokens=4,
        concurrency=1,
        status="ok",
        started_at="t0",
        finished_at="t1",
    )


def test_a_resumed_attempt_takes_the_samples_its_stopped_attempt_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # "a": stopped twice; its attempt a2 drew more, one of them failed (drawn again).
    store.append_samples([_sample("a", "a1", 0)])
    store.append_samples([_sample("a", "a2", i) for i in range(3)])
    store.append_samples([_sample("a", "a2", 3, error="connection reset")])
    # "b": stopped mid-commit (its request rows were written): its samples would count twice.
    store.append_samples([_sample("b", "b1", 0)])
    store.append_point(_point("other", "o1"), [_request("b", "b1")])
    # "c": recorded; its samples are its point's, nothing to take over.
    store.append_point(_point("c", "c1"), [], [_sample("c", "c1", 0)])
    taken = store.interrupted_samples(store.points())
    assert set(taken) == {"a"}
    assert [(r["attempt"], r["index"]) for r in taken["a"]] == [("a2", 0), ("a2", 1), ("a2", 2)]
