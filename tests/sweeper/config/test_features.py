"""The request features (issue 47) in the config room: one table, the id parts, the record
columns and back (also through a DataFrame, where a missing value is NaN), old plans read as
before, and which features decide the distribution."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sweeper
from sweeper.analysis.objective import request_config_id
from sweeper.config import REQUEST_KEYS, RequestConfig
from sweeper.config.features import (
    BY_NAME,
    FEATURES,
    SCALAR_FEATURES,
    STRUCTURED_FEATURES,
    feature_labels,
)
from sweeper.config.knobs import RANGES
from sweeper.config.labels import point_label_long
from sweeper.engines.base import RequestSpec
from sweeper.engines.capabilities import scored_under
from sweeper.proof.scored.processors import Sampling
from sweeper.results.records import RequestConfigColumns
from sweeper.results.scores import ScoreRecord
from sweeper.spec import GridSpec, WorkloadSpec

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
EVERY = {
    "min_p": 0.1,
    "repetition_penalty": 1.3,
    "frequency_penalty": 0.5,
    "presence_penalty": -0.5,
    "logit_bias": {50256: -100, 13: 2.5},
    "stop": ["\n\n", "END"],
    "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
    "regex": r"[0-9]+",
    "n": 4,
    "logprobs": 5,
}


def test_one_table_names_every_feature_once_with_its_kind() -> None:
    assert [f.name for f in FEATURES] == list(EVERY)
    assert SCALAR_FEATURES == (
        "min_p",
        "repetition_penalty",
        "frequency_penalty",
        "presence_penalty",
    )
    assert all(f.column == f.name and f.unused for f in FEATURES)
    # The scalar ones are grid axes beside temperature, top-p and top-k, each with a range.
    assert ("temperature", "top_p", "top_k", *SCALAR_FEATURES) == REQUEST_KEYS
    assert all(key in RANGES for key in (*SCALAR_FEATURES, "n", "logprobs"))
    # The structured ones are workload fields, the scalar ones grid fields: one spec key each.
    assert set(STRUCTURED_FEATURES) <= set(WorkloadSpec.model_fields)
    assert set(SCALAR_FEATURES) <= set(GridSpec.model_fields)


def test_the_id_names_every_feature_in_order_and_digests_the_structured_ones() -> None:
    rc = RequestConfig.make(0.7, 32, 1, 0.9, top_k=40, features=EVERY)
    parts = rc.id.split("-")
    assert parts[:3] == ["t0.7", "p0.9", "tk40"]
    # A negative value reads "m" for minus: "-" separates an id's parts.
    assert parts[3:7] == ["mp0.1", "rp1.3", "fp0.5", "ppm0.5"]
    assert [p[:2] for p in parts[-7:-3]] == ["lb", "st", "rf", "re"]
    assert all(len(p) == 8 and int(p[2:], 16) >= 0 for p in parts[-7:-3])
    assert parts[-3:] == ["n4", "lp5", "c1"]
    # The same bias written another way (other key order, ints for floats) is the same config.
    again = dict(EVERY, logit_bias={13: 2.5, 50256: -100.0})
    assert RequestConfig.make(0.7, 32, 1, 0.9, top_k=40, features=again).id == rc.id
    other = dict(EVERY, logit_bias={13: 2.5, 50256: -99.0})
    assert RequestConfig.make(0.7, 32, 1, 0.9, top_k=40, features=other).id != rc.id


def test_frozen_values_are_hashable_and_plain_values_come_back() -> None:
    rc = RequestConfig.make(0.7, 32, 1, features=EVERY)
    hash(rc)
    assert rc.logit_bias == ((13, 2.5), (50256, -100.0))
    assert rc.stop == ("\n\n", "END")
    plain = rc.feature_values(plain=True)
    assert plain["logit_bias"] == {13: 2.5, 50256: -100.0}
    assert plain["stop"] == ["\n\n", "END"]
    assert plain["response_format"] == EVERY["response_format"]
    assert plain["n"] == 4 and plain["logprobs"] == 5 and plain["regex"] == "[0-9]+"


def test_columns_round_trip_through_a_dataframe_to_the_same_config() -> None:
    configs = [
        RequestConfig.make(0.7, 32, 1, 0.9, top_k=40, features=EVERY),
        RequestConfig.make(0.0, 32, None, rate=2.0, features={"repetition_penalty": 1.3}),
        RequestConfig.make(0.0, 32, 2, features={"stop": ["."], "logprobs": 0}),
    ]
    frame = pd.DataFrame([{k: v for k, v in rc.columns().items()} for rc in configs])
    for rc, row in zip(configs, frame.to_dict("records"), strict=True):
        older = {k: v for k, v in row.items() if k != "request_config_id"}
        assert RequestConfig.from_columns(older) == rc
        assert request_config_id(row) == rc.id
    columns = configs[0].columns()
    assert json.loads(columns["logit_bias"]) == {"13": 2.5, "50256": -100.0}
    assert json.loads(columns["stop"]) == ["\n\n", "END"]
    assert json.loads(columns["response_format"]) == EVERY["response_format"]
    assert columns["regex"] == "[0-9]+" and columns["n"] == 4


def test_a_plan_without_features_reads_as_before() -> None:
    rc = RequestConfig.make(0.7, 32, 1, 0.9, top_k=40)
    assert rc.id == "t0.7-p0.9-tk40-c1"
    assert not set(rc.to_dict()) & set(EVERY)
    assert all(rc.columns()[name] is None for name in EVERY)
    assert RequestConfig.from_columns({"temperature": 0.7, "max_tokens": 32, "concurrency": 1}) == (
        RequestConfig.make(0.7, 32, 1)
    )
    data = RequestConfig.make(0.7, 32, 1, features=EVERY).to_dict()
    assert data["logit_bias"] == {13: 2.5, 50256: -100.0} and data["n"] == 4
    json.dumps(data)


def test_every_processor_decides_the_distribution_logprobs_does_not() -> None:
    base = RequestConfig.make(0.7, 32, 1)
    for name, value in EVERY.items():
        rc = RequestConfig.make(0.7, 32, 1, features={name: value})
        assert rc.comparison_key != base.comparison_key, name
        same = rc.sampling_key == base.sampling_key
        assert same == (not BY_NAME[name].decides_distribution), name
    assert [f.name for f in FEATURES if not f.decides_distribution] == ["logprobs"]
    # The load never does.
    assert RequestConfig.make(0.7, 32, 8).sampling_key == base.sampling_key


def test_labels_speak_the_features_a_row_uses() -> None:
    rc = RequestConfig.make(0.7, 32, 1, features={"min_p": 0.1, "stop": ["."], "n": 4})
    (row,) = pd.DataFrame([{**rc.columns(), "mode": "ar"}]).to_dict("records")
    digest = rc.id.split("-")[2][2:]
    assert feature_labels(row) == ["min_p=0.1", f"stop#{digest}", "n=4"]
    assert point_label_long(row) == f"AR T=0.7 min_p=0.1 stop#{digest} n=4 c=1"
    assert not math.isnan(row["min_p"])


def test_a_workload_with_features_dumps_to_what_validates_again() -> None:
    """The manifest stores the spec as a plain JSON dump, and a dataset's reload, `diagnose` and
    a follow-up read such a dump back: the schema must come back under OpenAI's key `schema`,
    the logit bias with its token ids as JSON writes them (strings, OpenAI's own spelling)."""
    features = {k: EVERY[k] for k in ("logit_bias", "stop", "response_format")}
    workload = WorkloadSpec.model_validate({"prompts": [{"id": "p", "text": "hi"}], **features})
    dumped = workload.model_dump(mode="json")
    assert dumped["response_format"]["json_schema"]["schema"] == SCHEMA
    assert dumped["logit_bias"] == {"50256": -100, "13": 2.5}
    assert WorkloadSpec.model_validate(dumped) == workload


#: A value of each codec: the round trip below picks a feature's value by its codec, never by
#: its name, so a feature added to `RequestFeatures` is covered without an edit here.
BY_CODEC: dict[str, Any] = {
    "float": 0.5,
    "int": 3,
    "text": "[0-9]+",
    "logit_bias": {7: 1.5, 3: -2.0},
    "stop": ["END", "\n\n"],
    "response_format": {"type": "json_object"},
}
#: The files of the classes that carry the features: the request config, the request an engine
#: sends, the record columns, the score and the judge's processors.
CARRIERS = (
    "sweeper/config/request.py",
    "sweeper/engines/base.py",
    "sweeper/results/records.py",
    "sweeper/results/scores.py",
    "sweeper/proof/scored/processors.py",
)


def test_a_feature_is_declared_once_and_rides_from_config_to_request_record_and_judge() -> None:
    """Adding a feature is one field of `RequestFeatures`: no carrier declares one by name,
    and every feature in the table goes config -> request -> record columns (validated) ->
    config again and the judge's `Sampling`, and its processors through a score record."""
    root = Path(sweeper.__file__).parent.parent
    for path in CARRIERS:
        for node in ast.walk(ast.parse((root / path).read_text())):
            if isinstance(node, ast.ClassDef):
                named = [
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign)
                    and isinstance(s.target, ast.Name)
                    and s.target.id in BY_NAME
                ]
                assert not named, f"{path}: {node.name} declares {named}"
    rc = RequestConfig.make(0.7, 8, 1, features={f.name: BY_CODEC[f.codec] for f in FEATURES})
    frozen = rc.feature_values()
    assert None not in frozen.values() and list(frozen) == [f.name for f in FEATURES]
    spec = RequestSpec("p", "hi", 8, rc.temperature, **frozen)
    assert spec.feature_values() == frozen
    row = RequestConfigColumns.model_validate(rc.columns()).model_dump()
    assert RequestConfig.from_columns(row) == rc
    assert {name: getattr(Sampling.of(row), name) for name in frozen} == frozen
    key = {"run_id": "r", "host": "h", "point_id": "p", "attempt": "a", "role": "test"}
    scored = {**key, "prompt_id": "p", "index": 0, "scorer": "self", "basis": "exact"}
    score = ScoreRecord.model_validate(
        {**scored, "temperature": 0.7, "order": ["temperature"], **scored_under("x", spec)}
    )
    judged = Sampling.of(score.model_dump())
    processors = {f.name: frozen[f.name] if f.processor else None for f in FEATURES}
    assert {name: getattr(judged, name) for name in frozen} == processors


@pytest.mark.parametrize(
    ("name", "column"),
    [
        ("stop", "{}"),
        ("stop", '"abc"'),
        ("stop", "[1, 2]"),
        ("stop", '["a", null]'),
        ("n", 2.5),
        ("n", True),
        ("logprobs", 1.5),
        ("min_p", float("inf")),
        ("repetition_penalty", "1.3"),
        ("response_format", "[]"),
        ("regex", 5),
    ],
)
def test_a_feature_column_no_writer_could_have_written_is_refused(name: str, column: Any) -> None:
    """A record column is read back as only what the writer writes (a stop column is a JSON list
    of strings, `n` an integer, a float finite, a response format a JSON object): anything else
    is a damaged line, never another request (`"abc"` read as three stop strings)."""
    with pytest.raises(ValueError, match=name):
        BY_NAME[name].from_column(column)
