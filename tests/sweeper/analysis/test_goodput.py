"""Goodput, the SLO and the knee on crafted records."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sweeper.analysis.goodput import (
    Knee,
    PointGoodput,
    RatePoint,
    Slo,
    compare_knees,
    knee,
    point_goodput,
    rate_point,
    request_is_good,
    request_itl,
)


def rec(ttft: float | None = 0.1, e2e: float = 1.0, tokens: int = 11, **extra: object) -> dict:
    return {"ttft": ttft, "e2e": e2e, "output_tokens": tokens, "error": None, **extra}


def test_request_itl_is_the_mean_time_per_token_after_the_first() -> None:
    assert request_itl(rec(ttft=0.1, e2e=1.1, tokens=11)) == pytest.approx(0.1)
    assert request_itl(rec(tokens=1)) == 0.0  # as vLLM: no gap to measure
    assert request_itl({"ttft": None, "e2e": 1.0, "output_tokens": 3}) is None


def test_every_set_target_must_hold_per_request() -> None:
    slo = Slo(ttft_s=0.2, itl_s=0.05, e2e_s=2.0)
    assert request_is_good(rec(ttft=0.2, e2e=0.7, tokens=11), slo)  # on the target is good
    assert not request_is_good(rec(ttft=0.21, e2e=0.7), slo)
    assert not request_is_good(rec(ttft=0.1, e2e=1.2, tokens=11), slo)  # ITL 0.11
    assert not request_is_good(rec(ttft=0.1, e2e=2.5, tokens=100), slo)  # E2E
    assert request_is_good(rec(ttft=0.1, e2e=2.5, tokens=100), Slo(ttft_s=0.2, itl_s=0.05))
    assert not request_is_good(rec(error="HTTP 500: boom"), Slo(e2e_s=9))
    assert not request_is_good(rec(finished=False), Slo(e2e_s=9))
    assert not request_is_good(rec(ttft=None), Slo(ttft_s=9))  # no first token: a miss


def test_point_goodput_counts_every_offered_request() -> None:
    slo = Slo(ttft_s=0.5, attainment=0.9)
    records = (
        [rec(ttft=0.1)] * 17
        + [rec(ttft=0.9)]
        + [rec(error="HTTP 503: overloaded")]
        + [{"error": "not sent: still queued", "finished": False, "sent_s": None}]
    )
    g = point_goodput(records, slo, wall_s=4.0)
    assert (g.offered, g.good, g.missed_error, g.missed_unfinished) == (20, 17, 1, 1)
    assert g.goodput_share == pytest.approx(0.85) and g.goodput_rps == pytest.approx(17 / 4)
    assert not g.meets_slo
    assert point_goodput(records[:17] + records[18:19], slo, 4.0).meets_slo  # 17 of 18


def test_point_goodput_reads_a_dataframe_with_nan() -> None:
    frame = pd.DataFrame([rec(), rec(ttft=float("nan")), rec(error=float("nan"))])
    g = point_goodput(frame, Slo(ttft_s=0.5), wall_s=1.0)
    assert (g.offered, g.good) == (3, 2)


def test_attainment_reads_like_a_percentile_for_one_target() -> None:
    """`TTFT p99 <= x` and `99% of requests have TTFT <= x` agree for one target."""
    records = [rec(ttft=0.01 * i) for i in range(1, 201)]  # 0.01 .. 2.00
    assert point_goodput(records, Slo(ttft_s=1.98), 1.0).meets_slo  # 198 of 200
    assert not point_goodput(records, Slo(ttft_s=1.97), 1.0).meets_slo


def test_joint_targets_are_stricter_than_each_percentile() -> None:
    # 2% miss TTFT, another 2% miss ITL: each target alone is met by 98%, both by 96%.
    records = [rec(ttft=0.9)] * 2 + [rec(e2e=9.0)] * 2 + [rec()] * 96
    both = Slo(ttft_s=0.5, itl_s=0.5, attainment=0.97)
    assert point_goodput(records, Slo(ttft_s=0.5, attainment=0.97), 1.0).meets_slo
    assert point_goodput(records, Slo(itl_s=0.5, attainment=0.97), 1.0).meets_slo
    assert not point_goodput(records, both, 1.0).meets_slo


def test_bad_slos_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Slo()
    with pytest.raises(ValueError, match="greater than 0"):
        Slo(ttft_s=0)
    with pytest.raises(ValueError, match="less than or equal to 1"):
        Slo(e2e_s=1, attainment=1.5)


def point(
    rate: float, share: float, *, e2e: float = 1.0, itl: float = 0.05, client_bound: bool = False
) -> RatePoint:
    good = PointGoodput(100, int(share * 100), 0, 0, share, share * rate, share >= 0.99)
    return RatePoint(rate, good, e2e, itl, client_bound)


def test_knee_is_the_top_of_the_passing_run_from_the_lowest_rate() -> None:
    k = knee([point(4, 0.95), point(1, 1.0), point(2, 0.995), point(8, 1.0)])
    assert k.rate == 2 and not k.censored
    assert k.stopped_by == "misses the SLO at 4 req/s (95% good)"  # 8 passing does not count


def test_knee_censored_none_and_client_bound() -> None:
    assert knee([point(1, 1.0), point(math.inf, 1.0)]) == Knee(math.inf, True, None)
    below = knee([point(0.5, 0.5), point(1, 1.0)])
    assert below.rate is None and below.stopped_by is not None
    bound = knee([point(1, 1.0), point(2, 1.0, client_bound=True), point(4, 1.0)])
    assert bound.rate == 1 and bound.stopped_by == "client-bound at 2 req/s"


def test_compare_knees_ratio_and_latency_speedups() -> None:
    ddtree = [
        point(1, 1.0, e2e=0.5, itl=0.02),
        point(2, 1.0, e2e=0.8, itl=0.03),
        point(4, 0.9, e2e=3.0, itl=0.2),
    ]
    ar = [
        point(1, 1.0, e2e=1.0, itl=0.05),
        point(2, 0.9, e2e=2.0, itl=0.1),
        point(4, 0.5, e2e=6.0, itl=0.3),
    ]
    c = compare_knees(ddtree, ar)
    assert (c.knee.rate, c.baseline.rate, c.ratio) == (2, 1, 2.0)
    by_rate = {s.rate: s for s in c.latency}
    assert by_rate[1].e2e == pytest.approx(2.0) and by_rate[1].itl == pytest.approx(2.5)
    assert by_rate[1].below_knees and not by_rate[2].below_knees
    assert by_rate[4].e2e == pytest.approx(2.0)


def test_compare_knees_without_a_finite_uncensored_pair_has_no_ratio() -> None:
    c = compare_knees([point(1, 1.0), point(2, 1.0)], [point(1, 1.0), point(2, 0.5)])
    assert c.knee.censored and c.ratio is None  # DDTree's knee is only a lower bound


def test_rate_point_medians_skip_failures() -> None:
    records = [rec(e2e=1.0), rec(e2e=3.0), rec(e2e=100.0, error="x"), rec(e2e=2.0)]
    p = rate_point(2.0, records, Slo(e2e_s=2.5), wall_s=2.0, client_bound=False)
    assert p.e2e_p50 == pytest.approx(2.0)
    assert p.goodput.good == 2 and p.goodput.goodput_rps == pytest.approx(1.0)
