"""Wilson's score bound: known values, and the small-sample caution it exists for."""

from __future__ import annotations

import pytest

from sweeper.stats.intervals import wilson_upper


def test_zero_of_few_is_not_read_as_zero() -> None:
    # 0 of 8 at 95%: z^2 / (n + z^2) = 3.8415 / 11.8415.
    assert wilson_upper(0, 8) == pytest.approx(0.32442, abs=1e-4)
    assert wilson_upper(0, 8000) < 0.001


def test_known_value_and_edges() -> None:
    assert wilson_upper(5, 10) == pytest.approx(0.76339, abs=1e-4)
    assert wilson_upper(10, 10) == 1.0
    assert wilson_upper(0, 0) == 1.0
    assert wilson_upper(1, 100, confidence=0.99) > wilson_upper(1, 100)
