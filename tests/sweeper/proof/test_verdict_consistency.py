"""One worst verdict per point everywhere: the points table, the report's matrix and `compare`.

The run directories hold points whose requests mix exactly the verdicts on which the old orders
disagreed: {nondeterministic, garbled} (the determinism module ranked nondeterministic worst, the
report garbled) and {exact, n/a} (exact vs n/a). The records go through the product's own path:
`summarize` judges, `measured_point` shapes the records, `RunStore` writes, `build_view` and
`compare_runs` read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.analysis.compare import compare_loaded
from sweeper.analysis.summary import summarize
from sweeper.config import RequestConfig, ServerConfig
from sweeper.engines.capabilities import near_tie_margin
from sweeper.measure.point import measured_point, point_columns, request_rows
from sweeper.measure.workload import WorkloadResult
from sweeper.plan import Point
from sweeper.proof.verdicts import MATRIX_STATES
from sweeper.report.assemble import build_view
from sweeper.results.reader import read_run
from sweeper.results.store import RunStore, utc_now
from sweeper.spec import DeterminismSpec

CLEAN = "The tide comes in, the tide goes out, the gulls cry over the sand and sea."
GARBLED = "The.r!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
IDS = list(range(10, 30))
MARGINS = [2.0] * len(IDS)
RC = RequestConfig.make(0.0, 20, 1)
AR = ServerConfig.make("ar", {"cuda_graph": False})
MIXED_BAD = ServerConfig.make(
    "speculative", {"budget": 8, "topk": 1, "block_size": 8, "cuda_graph": False}
)
MIXED_OK = ServerConfig.make(
    "speculative", {"budget": 8, "topk": 4, "block_size": 8, "cuda_graph": False}
)


def _rec(prompt: str, repeat: int, ids: list[int], text: str) -> dict[str, Any]:
    return {
        "prompt_id": prompt,
        "repeat": repeat,
        "token_ids": ids,
        "text": text,
        "top2_margins": MARGINS,
        "output_tokens": len(ids),
        "ttft": 0.1,
        "itls": [0.01] * max(len(ids) - 1, 0),
        "e2e": 0.5,
        "error": None,
        "sha256": "",
    }


def _result(records: list[dict[str, Any]]) -> WorkloadResult:
    from sweeper.engines.base import RequestSpec

    specs = [
        RequestSpec(
            prompt_id=r["prompt_id"], prompt="", max_tokens=20, temperature=0.0, repeat=r["repeat"]
        )
        for r in records
    ]
    return WorkloadResult(records=list(zip(specs, records, strict=True)), wall_s=1.0)


def _write_run(root: Path, broken: bool) -> Path:
    store = RunStore.create(
        root,
        {"sweep": "consistency", "sweeper_version": "0", "spec": {}, "runtime_source_hash": ""},
    )
    ar_point = Point("h", AR, RC)
    baseline = [_rec(p, r, IDS, CLEAN) for p in ("x", "y") for r in (0, 1)]
    bad_ids = IDS[:3] + [99] * (len(IDS) - 3)
    points = {
        # x: repeats disagree (nondeterministic); y: visibly corrupt (garbled).
        Point("h", MIXED_BAD, RC, ar_point.point_id): (
            [
                _rec("x", 0, IDS, CLEAN),
                _rec("x", 1, IDS[:5] + [77] * 15, CLEAN[:20] + " sand."),
                _rec("y", 0, bad_ids, GARBLED),
                _rec("y", 1, bad_ids, GARBLED),
            ]
            if broken
            else [_rec(p, r, IDS, CLEAN) for p in ("x", "y") for r in (0, 1)],
            baseline,
        ),
        # x: exact; y: nothing to compare with (its baseline has no output for y): n/a.
        Point("h", MIXED_OK, RC, ar_point.point_id): (
            [_rec(p, r, IDS, CLEAN) for p in ("x", "y") for r in (0, 1)],
            [row for row in baseline if row["prompt_id"] == "x"] if broken else baseline,
        ),
    }
    ar_record, ar_requests = _measure(store, ar_point, baseline, None)
    store.commit_point(ar_record, ar_requests)
    for point, (records, reference) in points.items():
        record, requests = _measure(store, point, records, reference, ar_record.model_dump())
        store.commit_point(record, requests)
    return store.dir


def _measure(
    store: RunStore,
    point: Point,
    records: list[dict[str, Any]],
    reference: list[dict[str, Any]] | None,
    baseline_point: dict[str, Any] | None = None,
) -> Any:
    result = _result(records)
    key = point_columns(store.run_id, point, RunStore.new_attempt(), "ddtree_runtime")
    rows = request_rows(result, key, near_tie_margin=near_tie_margin("ddtree_runtime"))
    summary, verdicts = summarize(
        point.server_config,
        point.request_config,
        rows,
        result.wall_s,
        policy=DeterminismSpec(),
        baseline_rows=reference,
        baseline_point=baseline_point,
    )
    return measured_point(
        point,
        result,
        rows,
        summary=summary,
        verdicts=verdicts,
        key=key,
        baseline_point=baseline_point,
        fingerprint=None,
        started_at=utc_now(),
        finished_at=utc_now(),
        log_path="",
        log_text="",
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("results")
    return _write_run(root, broken=False), _write_run(root, broken=True)


def test_points_table_report_matrix_and_compare_name_the_same_worst_verdict(
    runs: tuple[Path, Path],
) -> None:
    clean, broken = runs
    view = build_view(read_run(broken))
    table = dict(zip(view.points["point_id"], view.points["determinism"], strict=True))
    bad_id = Point("h", MIXED_BAD, RC).point_id
    ok_id = Point("h", MIXED_OK, RC).point_id
    # The mixes the old orders disagreed on, and the one order's answer for each.
    assert table[bad_id] == "garbled"
    assert table[ok_id] == "n/a"
    labels = dict(zip(view.points["point_id"], view.points["config_long"], strict=True))
    for point_id in (bad_id, ok_id):
        row = view.verdict_matrix.loc[labels[point_id]]
        matrix_worst = max(row, key=MATRIX_STATES.index)
        assert matrix_worst == table[point_id], (point_id, dict(row))
    comparison = compare_loaded(read_run(clean), read_run(broken), threshold=0.05)
    named = {r.key: r.b["determinism"] for r in comparison.rows}
    by_label = {r.label: r for r in comparison.rows}
    assert sorted(named.values()) == sorted(table.values())
    flagged = {r.b["determinism"]: r for r in by_label.values() if r.is_regression}
    assert sorted(flagged) == ["garbled", "n/a"]
    assert "determinism broken (garbled)" in flagged["garbled"].flags
    # Exact before, half compared with nothing now: `best` no longer counts it, nor may compare.
    assert flagged["n/a"].flags == ["no longer proven (n/a)"]
