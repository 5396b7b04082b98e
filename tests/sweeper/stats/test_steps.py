"""A sum of step functions of uniforms, simulated: its law as the steps make it (mean, spread,
the skew of a rare large step), and p-values that keep their level where a normal one would
not; several sums on shared uniforms."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from sweeper.stats.steps import simulated_joint_sums, simulated_sums, tail_p_values

#: A step function with a rare large step (a token far in a tail): -0.1 on [0, 0.98), 4.9 on
#: [0.98, 1]: mean 0, variance 0.49, skewed to the right.
SKEWED = ((0.98, 1.0), (-0.1, 4.9))


def test_the_simulated_sum_has_the_steps_mean_and_variance() -> None:
    rng = np.random.default_rng(0)
    sums = simulated_sums([(0.25, 1.0)] * 40, [(-1.0, 1 / 3)] * 40, 4000, rng)
    assert sums.mean() == pytest.approx(0.0, abs=0.1)
    assert sums.var() == pytest.approx(40 / 3, rel=0.1)
    skewed = simulated_sums([SKEWED[0]] * 30, [SKEWED[1]] * 30, 4000, rng)
    assert skewed.var() == pytest.approx(30 * 0.49, rel=0.1)
    assert np.mean((skewed - skewed.mean()) ** 3) > 0  # the rare large step skews it right


def test_tail_p_values_count_the_observed_among_the_draws() -> None:
    sums = np.arange(99.0)  # 0 .. 98
    assert tail_p_values(1000.0, 1000.0, sums) == (1 / 100, 1.0)
    assert tail_p_values(-5.0, -5.0, sums) == (1.0, 1 / 100)
    assert tail_p_values(49.0, 49.0, sums) == (51 / 100, 51 / 100)


def test_simulated_p_values_keep_their_level_where_the_normal_does_not() -> None:
    rng = np.random.default_rng(1)
    n, trials = 30, 400
    edges, values = [SKEWED[0]] * n, [SKEWED[1]] * n
    sd = (n * 0.49) ** 0.5
    simulated = normal = 0
    for _ in range(trials):
        observed = float(sum(np.where(rng.random(n) < 0.98, -0.1, 4.9)))
        large, _ = tail_p_values(observed, observed, simulated_sums(edges, values, 199, rng))
        simulated += large <= 0.05
        normal += 1 - NormalDist().cdf(observed / sd) <= 0.05
    assert simulated / trials <= 0.07  # about 5%
    assert normal / trials > simulated / trials  # the normal reading alarms more


def test_joint_sums_share_their_uniforms_and_the_first_is_the_single_sum() -> None:
    edges, values = [SKEWED[0]] * 20, [SKEWED[1]] * 20
    mirrored = [(0.3, -14.7)] * 20  # -3 times the first: the same uniforms make it exactly so
    joint = simulated_joint_sums(edges, [values, mirrored], 500, np.random.default_rng(5))
    assert np.allclose(joint[:, 1], -3 * joint[:, 0])
    single = simulated_sums(edges, values, 500, np.random.default_rng(5))
    assert np.array_equal(joint[:, 0], single)
