"""A request config to record columns and back: the id is stored, and a run written before it
was is read back to the same id; a missing temperature is 0 in one place."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sweeper.analysis.objective import request_config_id
from sweeper.config import DEFAULT_TEMPERATURE, RequestConfig, temperature_of

CONFIGS = [
    RequestConfig.make(0.0, 32, 4),
    RequestConfig.make(0.7, 32, 1, 0.9, 1234, top_k=40),
    RequestConfig.make(0.0, 16, None, rate=2.0),
    RequestConfig.make(0.0, 16, None, rate=math.inf, max_concurrency=8),
    RequestConfig.make(0.5, 16, None, rate=0.5, arrival="gamma", burstiness=0.25),
]


@pytest.mark.parametrize("rc", CONFIGS, ids=lambda rc: rc.id)
def test_columns_round_trip_to_the_same_id(rc: RequestConfig) -> None:
    columns = rc.columns()
    assert columns["request_config_id"] == rc.id
    assert request_config_id(columns) == rc.id
    # An older run has no request_config_id column: its id is rebuilt from the columns, also
    # from a parquet-read row where a missing value is NaN.
    older = {k: v for k, v in columns.items() if k != "request_config_id"}
    assert RequestConfig.from_columns(older).id == rc.id
    (row,) = pd.DataFrame([older]).to_dict("records")
    assert request_config_id(row) == rc.id


def test_a_missing_temperature_is_greedy() -> None:
    assert DEFAULT_TEMPERATURE == 0.0
    assert temperature_of({}) == temperature_of({"temperature": None}) == 0.0
    assert temperature_of({"temperature": float("nan")}) == 0.0
    assert temperature_of({"temperature": 0.7}) == 0.7
