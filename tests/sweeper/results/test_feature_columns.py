"""The request features (issue 47) as record columns: written by a point's rows, kept by the
store, read back by the one loader to the same request config, spoken in the report's labels,
part of what a dataset point and a knee series are matched on, and of what an earlier run's AR
point must share to be a baseline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sweeper.analysis.datasets import LOAD_KEYS
from sweeper.config import RequestConfig
from sweeper.config.features import FEATURES
from sweeper.config.labels import point_label_long
from sweeper.measure.point import point_columns
from sweeper.plan import build_plan
from sweeper.report.knees import SETTING
from sweeper.results.baseline import EarlierBaseline
from sweeper.results.reader import read_run
from sweeper.results.records import PointRecord, RequestRecord
from sweeper.results.store import RunStore
from sweeper.spec import parse_spec

SPEC = parse_spec(
    "name: s\nbaseline: false\ngrid: {budget: [0], topk: [1], repetition_penalty: [1.3]}\n"
    "workload:\n  prompts: [{id: a, text: hi}]\n  logit_bias: {13: -100}\n"
    "  stop: ['END']\n  logprobs: 2\n"
    "  response_format: {type: json_schema, json_schema: {name: a, schema: {type: object}}}\n"
)


def test_feature_columns_survive_the_store_and_the_loader(tmp_path: Path) -> None:
    (point,) = build_plan(SPEC).points()
    rc = point.request_config
    store = RunStore.create(
        tmp_path,
        {"sweep": "s", "sweeper_version": "0", "spec": {"name": "s"}, "runtime_source_hash": "h"},
    )
    key = point_columns(store.run_id, point, "a1", "ddtree_runtime")
    request = RequestRecord(**key, prompt_id="a", repeat=0, token_ids=[1, 2])
    store.append_point(
        PointRecord(**key, status="ok", started_at="t0", finished_at="t1"), [request]
    )
    store.consolidate()
    run = read_run(store.dir)
    assert run.points is not None
    (row,) = run.points.to_dict("records")
    assert row["logit_bias"] == '{"13":-100.0}' and row["stop"] == '["END"]'
    assert row["repetition_penalty"] == 1.3 and row["logprobs"] == 2
    older = {k: v for k, v in row.items() if k != "request_config_id"}
    assert RequestConfig.from_columns(older) == rc
    (read,) = run.requests(["point_id", *(f.column for f in FEATURES)]).to_dict("records")
    assert read["response_format"] == rc.response_format
    assert "repetition_penalty=1.3 logit_bias#" in point_label_long(row)

    # An earlier run's AR point is a baseline only for a point asking the same features.
    earlier = EarlierBaseline(store.dir)
    assert earlier.point_for(point) is not None
    other = replace(point, request_config=replace(rc, logit_bias=((13, -99.0),)))
    assert earlier.point_for(other) is None
    run.close()


def test_datasets_and_knees_match_on_every_feature() -> None:
    for feature in FEATURES:
        assert feature.column in LOAD_KEYS and feature.column in SETTING
