"""Per-point metrics on crafted records: throughput, percentiles, tau, failed requests, speedup."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sweeper.analysis.metrics import percentiles, point_metrics, speedup


def rec(
    ttft: float, itls: list[float], e2e: float, tokens: int, tau: float | None, **extra: object
) -> dict[str, object]:
    return {"ttft": ttft, "itls": itls, "e2e": e2e, "output_tokens": tokens, "tau": tau, **extra}


RECORDS = [
    rec(0.1, [0.01, 0.02], 1.0, 10, 2.0),
    rec(0.2, [0.03], 2.0, 20, 3.0),
    rec(0.3, [0.04, 0.05, 0.06], 3.0, 30, None),
    rec(0.4, [], 4.0, 40, 4.0),
    rec(9.9, [9.9], 99.0, 0, 9.0, error="HTTP 500"),
]


def test_point_metrics_on_crafted_records() -> None:
    m = point_metrics(RECORDS, wall_s=5.0)
    assert (m.n_requests, m.n_errors, m.output_tokens) == (4, 1, 100)
    assert m.output_tok_s == pytest.approx(100 / 5.0)
    assert m.request_s == pytest.approx(4 / 5.0)
    # numpy linear interpolation over 0.1, 0.2, 0.3, 0.4
    assert m.ttft_p50 == pytest.approx(0.25)
    assert m.ttft_p90 == pytest.approx(0.37)
    assert m.ttft_p99 == pytest.approx(0.397)
    # ITLs pooled over all requests: 0.01..0.06
    assert m.itl_p50 == pytest.approx(0.035)
    assert m.e2e_p50 == pytest.approx(2.5)
    assert m.e2e_p99 == pytest.approx(3.97)
    assert m.tau == pytest.approx(3.0)  # mean of 2, 3, 4; the failed request's 9 is ignored
    columns = m.as_columns()
    assert {"output_tok_s", "request_s", "ttft_p50", "itl_p90", "e2e_p99", "tau"} <= set(columns)


def test_metrics_accept_a_dataframe_with_nan() -> None:
    frame = pd.DataFrame(RECORDS[:2] + [rec(0.3, [], 3.0, 5, math.nan, error=math.nan)])
    m = point_metrics(frame, wall_s=2.0)
    assert m.n_requests == 3
    assert m.n_errors == 0
    assert m.tau == pytest.approx(2.5)


def test_no_successful_requests() -> None:
    m = point_metrics([rec(1, [], 1, 5, 1.0, error="boom")], wall_s=3.0)
    assert m.n_requests == 0
    assert m.output_tok_s is None and m.ttft_p50 is None and m.tau is None


def test_percentiles_of_nothing() -> None:
    assert percentiles([], "ttft") == {"ttft_p50": None, "ttft_p90": None, "ttft_p99": None}
    assert percentiles([None, math.nan, 1.0], "x")["x_p99"] == 1.0


def test_speedup() -> None:
    assert speedup(30.0, 12.0) == pytest.approx(2.5)
    assert speedup(30.0, None) is None
    assert speedup(None, 12.0) is None
    assert speedup(30.0, 0.0) is None
