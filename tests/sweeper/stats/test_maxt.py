"""Max-T: exact under exchangeability (a null's p-values are uniform), and a statistic that
stands out is found whichever it is, one way or both."""

from __future__ import annotations

import numpy as np

from sweeper.stats.maxt import max_t


def test_an_observed_row_drawn_like_the_reshuffles_gives_uniform_p_values() -> None:
    rng = np.random.default_rng(0)
    ps = [max_t(rng.normal(size=(200, 3)), (True, True, False))[0] for _ in range(400)]
    # Under the null P(p <= a) <= a (ranks among exchangeable rows): about 5% at 0.05.
    assert 0.02 <= np.mean(np.array(ps) <= 0.05) <= 0.08


def test_a_statistic_far_out_is_found_and_a_one_sided_one_only_when_large() -> None:
    rng = np.random.default_rng(1)
    stats = rng.normal(size=(500, 3))
    stats[0] = [0.0, -6.0, 0.0]
    combined, per = max_t(stats, (True, True, False))
    assert combined < 0.01 and per[1] < 0.01 and per[0] > 0.05
    stats[0] = [0.0, 0.0, -6.0]  # small is not extreme for a one-sided statistic
    combined, per = max_t(stats, (True, True, False))
    assert combined > 0.05 and per[2] > 0.9


def test_a_statistic_no_reshuffle_moves_says_nothing() -> None:
    stats = np.zeros((100, 2))
    stats[:, 0] = np.random.default_rng(2).normal(size=100)
    stats[0] = [0.0, 5.0]
    combined, per = max_t(stats, (True, True))
    assert per[1] == 1.0 and combined > 0.05
