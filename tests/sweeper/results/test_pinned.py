"""A resume is the same experiment: what changed since the run started is named; only the
search's stop and the readiness timeout may change."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from sweeper.results.manifest import Manifest
from sweeper.results.pinned import changed_inputs, file_hashes

SPEC: dict[str, Any] = {
    "name": "t",
    "grid": {"budget": [8, 16], "topk": [4]},
    "search": {"strategy": "tpe", "stop": {"restarts": 3}, "seed": 0},
    "runtime": {"ready_timeout_s": 60, "engine": "ddtree_runtime"},
    "workload": {"prompts": [{"id": "a", "text": "hi"}]},
}


def _manifest(spec: dict[str, Any]) -> Manifest:
    return Manifest(
        run_id="r", created_at="t", sweep="t", sweeper_version="0", spec=spec,
        runtime_source_hash="aaaa",
    )  # fmt: skip


def _with(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(SPEC)
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = spec
        for key in path:
            node = node[key]
        node[last] = value
    return spec


def test_another_strategy_or_grid_is_another_experiment() -> None:
    old = _manifest(SPEC)
    assert changed_inputs(old, _with(search__strategy="random"), "aaaa") == ["spec search.strategy"]
    assert changed_inputs(old, _with(grid__budget=[8, 16, 32]), "aaaa") == ["spec grid.budget"]
    prompts = [{"id": "a", "text": "hello"}]
    assert changed_inputs(old, _with(workload__prompts=prompts), "aaaa") == [
        "spec workload.prompts[0].text"
    ]


def test_search_stop_timeout_and_new_fields_may_change() -> None:
    old = _manifest(SPEC)
    grown = _with(search__stop={"restarts": 6}, runtime__ready_timeout_s=300)
    grown["determinism"] = {"sampled": "auto"}  # a field a newer sweeper added
    assert changed_inputs(old, grown, "aaaa") == []


def test_the_runtime_source_counts_where_it_runs() -> None:
    changed = changed_inputs(_manifest(SPEC), SPEC, "bbbb")
    assert changed == ["the runtime's source (hash aaaa -> bbbb)"]
    assert changed_inputs(_manifest(SPEC), SPEC, None) == []  # an engine that never runs it


def test_an_input_file_changed_is_named_even_where_the_prompts_are_not(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hi", "note": "unused"}\n')
    old = _manifest(SPEC)
    old.input_files = file_hashes([data])
    assert changed_inputs(old, SPEC, None, file_hashes([data])) == []
    data.write_text('{"prompt": "hi", "note": "edited"}\n')
    assert changed_inputs(old, SPEC, None, file_hashes([data])) == [f"the file {data}"]
    data.unlink()
    assert changed_inputs(old, SPEC, None, file_hashes([data])) == [f"the file {data}"]
