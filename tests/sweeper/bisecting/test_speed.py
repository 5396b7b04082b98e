"""The speed judgement's arithmetic (item 2): an interval of throughput is never below zero,
two ends are compared by their ratio with both ends' noise in it, and an end too wide to
resolve the threshold decides nothing, the reason naming that end."""

from __future__ import annotations

import pytest

from sweeper.analysis.objective import Interval
from sweeper.bisect.speed import LogInterval, compare, percent

#: The issue's good end: three starts on a busy machine.
ISSUE_GOOD = (55.5, 100.4, 155.1)


def test_item2_a_throughput_interval_is_never_below_zero() -> None:
    linear = Interval.of(ISSUE_GOOD)
    assert linear.low is not None and linear.low < 0  # the issue's `[-20.3, 227.6]`
    log = LogInterval.of(ISSUE_GOOD)
    assert log.low is not None and log.high is not None
    assert 0 < log.low < log.mean < log.high
    assert log.said() == "95.3 tok/s [26.4, 343.1] (n=3)"
    with pytest.raises(ValueError, match="positive samples"):
        LogInterval.of([10.0, 0.0])


def test_item2_the_reason_names_the_end_that_decides_nothing() -> None:
    """The issue's bad end (nine starts, 16.7 tok/s) against its good end: not 'the threshold
    lies inside its interval' (false), and not bad either while the good end is that wide."""
    bad = LogInterval.of([16.2, 16.5, 16.7, 16.9, 17.1, 16.4, 16.8, 16.6, 17.0])
    verdict = compare(bad, LogInterval.of(ISSUE_GOOD), 0.1)
    assert verdict.outcome is None and verdict.again == {"good"}
    assert "the good end's interval spans x12.98, wider than the 10% threshold can resolve" in (
        verdict.reason
    )
    assert "the commit's interval" not in verdict.reason
    narrow_good = LogInterval.of([99.0, 100.0, 101.0, 100.5, 99.5, 100.0])
    decided = compare(bad, narrow_good, 0.1)
    assert decided.outcome == "bad" and decided.reason.endswith("wholly below the line 0.900")
    close = compare(LogInterval.of([90.0, 90.5, 89.5]), narrow_good, 0.1)
    assert close.outcome is None and close.again == {"commit", "good"}
    assert "both ends narrow" in close.reason


def test_item13_a_threshold_prints_as_given() -> None:
    assert [percent(f) for f in (0.005, 0.1, 0.125, 0.99)] == ["0.5%", "10%", "12.5%", "99%"]
