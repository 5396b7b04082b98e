"""Neyman's smooth components: orthonormal under uniformity, bounded honestly on intervals, the
chi-squared tail in closed form; and a test at level alpha stays there on uniform values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.stats.uniformity import (
    chi2_sf,
    component_bounds,
    least_square,
    legendre,
    normal_two_sided,
    term_bounds,
)


def test_the_components_are_orthonormal_under_the_uniform_law() -> None:
    u = (np.arange(200_000) + 0.5) / 200_000  # midpoint rule on [0, 1]
    gram = np.array(
        [[np.mean(legendre(i, u) * legendre(j, u)) for j in range(1, 5)] for i in range(1, 5)]
    )
    assert gram == pytest.approx(np.eye(4), abs=1e-6)
    assert [float(np.mean(legendre(j, u))) for j in range(1, 5)] == pytest.approx([0] * 4, abs=1e-9)


def test_term_bounds_hold_every_value_inside_the_interval() -> None:
    rng = np.random.default_rng(0)
    lo = rng.random(500) * 0.8
    hi = lo + rng.random(500) * 0.2
    for j in range(1, 5):
        least, most = term_bounds(j, lo, hi)
        for share in np.linspace(0, 1, 11):
            value = legendre(j, lo + share * (hi - lo))
            assert np.all(least <= value + 1e-12) and np.all(value <= most + 1e-12)
    # phi_2 turns at 1/2: an interval around it reaches the minimum there, not at its ends.
    least, _ = term_bounds(2, np.array([0.4]), np.array([0.6]))
    assert least[0] == pytest.approx(legendre(2, np.array([0.5]))[0])


def test_exact_values_give_a_point_and_intervals_widen_it() -> None:
    u = np.random.default_rng(1).random(1000)
    lo, hi = component_bounds(1, u, u)
    assert lo == hi == pytest.approx(float(np.sum(legendre(1, u))) / math.sqrt(1000))
    wide = component_bounds(1, u * 0.9, np.minimum(u * 1.1, 1.0))
    assert wide[0] < lo < wide[1]
    assert least_square((-1.0, 2.0)) == 0.0 and least_square((1.5, 2.0)) == 2.25


def test_chi2_tail_in_closed_form() -> None:
    # Known quantiles: chi2(1) 3.841, chi2(2) 5.991, chi2(3) 7.815, chi2(4) 9.488 at 5%.
    for df, x in ((1, 3.841459), (2, 5.991465), (3, 7.814728), (4, 9.487729)):
        assert chi2_sf(x, df) == pytest.approx(0.05, rel=1e-5)
    assert chi2_sf(0.0, 3) == 1.0
    assert normal_two_sided(1.959964) == pytest.approx(0.05, rel=1e-5)


def test_the_smooth_test_keeps_its_level_on_uniform_values() -> None:
    u = np.random.default_rng(2).random((4000, 300))
    z = np.stack([legendre(j, u).sum(axis=1) / math.sqrt(300) for j in range(1, 5)])
    p_direction = np.array([normal_two_sided(float(x)) for x in z[0]])
    p_shape = np.array([chi2_sf(float(x), 3) for x in (z[1:] ** 2).sum(axis=0)])
    rejected = float(np.mean((p_direction <= 0.04) | (p_shape <= 0.01)))
    # alpha 0.05 split 0.04 / 0.01: at most about 5% (binomial sd 0.35% at 4000 trials), and
    # not a test that never rejects.
    assert 0.035 <= rejected <= 0.06
