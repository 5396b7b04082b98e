"""Are values i.i.d. uniform on [0, 1]? Neyman's smooth test, on values known only to lie in an
interval each.

Neyman's components are sums of the orthonormal (shifted) Legendre polynomials on [0, 1]:
z_j = sum_i phi_j(u_i) / sqrt(n), each N(0, 1) under uniformity and independent of the others
(asymptotically; exact moments: mean 0, variance 1, uncorrelated). The first is the mean's
shift (phi_1 = sqrt(3) (2u - 1)): values pushed up or down; the second the spread (a U or a
hump); the third and fourth skew and peaks. Weights w_i (fixed before the values are seen, or
at least before each value) give z_j = sum w_i phi_j(u_i) / sqrt(sum w_i^2), the same law.

Where a value is known only as an interval [lo, hi], each sum is bounded by the least and most
its terms can be on their intervals (`component_bounds`): a test that rejects only when every
value inside the intervals would have it rejected keeps its level whatever the true values are.

numpy and the standard library only.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()

#: Shifted Legendre polynomials on [0, 1], orthonormal under the uniform law, coefficients
#: lowest power first (P_j(2u - 1) * sqrt(2j + 1)).
LEGENDRE: tuple[tuple[float, ...], ...] = (
    (-math.sqrt(3), 2 * math.sqrt(3)),
    (math.sqrt(5), -6 * math.sqrt(5), 6 * math.sqrt(5)),
    (-math.sqrt(7), 12 * math.sqrt(7), -30 * math.sqrt(7), 20 * math.sqrt(7)),
    (3.0, -60.0, 270.0, -420.0, 210.0),
)


def legendre(j: int, u: np.ndarray) -> np.ndarray:
    """phi_j(u), j = 1..4."""
    return np.polynomial.polynomial.polyval(u, LEGENDRE[j - 1])


@functools.cache
def _turning_points(j: int) -> np.ndarray:
    """Where phi_j turns inside (0, 1)."""
    roots = np.polynomial.polynomial.polyroots(
        np.polynomial.polynomial.polyder(np.array(LEGENDRE[j - 1]))
    )
    real = roots[np.abs(roots.imag) < 1e-12].real
    return np.sort(real[(real > 0) & (real < 1)])


def term_bounds(j: int, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least and most phi_j can be on each [lo, hi] (its ends and turning points inside)."""
    values = [legendre(j, lo), legendre(j, hi)]
    for point in _turning_points(j):
        inside = (lo < point) & (point < hi)
        at = legendre(j, np.full_like(lo, point))
        values.append(np.where(inside, at, values[0]))
    stacked = np.stack(values)
    return stacked.min(axis=0), stacked.max(axis=0)


def component_bounds(
    j: int, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray | None = None
) -> tuple[float, float]:
    """The least and most z_j can be for values anywhere in their intervals."""
    w = np.ones_like(lo) if weights is None else weights
    scale = math.sqrt(float(np.sum(w * w)))
    if scale == 0:
        return 0.0, 0.0
    least, most = term_bounds(j, lo, hi)
    return float(np.sum(w * least)) / scale, float(np.sum(w * most)) / scale


def normal_two_sided(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z."""
    return min(1.0, 2.0 * (1.0 - _NORMAL.cdf(abs(z))))


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X chi-squared with an integer number of degrees of freedom (closed form)."""
    if x <= 0:
        return 1.0
    half = x / 2.0
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return min(1.0, math.exp(-half) * total)
    total = math.erfc(math.sqrt(half))
    term = math.sqrt(half) * math.exp(-half) / math.gamma(1.5)
    for i in range(1, (df + 1) // 2):
        total += term
        term *= half / (i + 0.5)
    return min(1.0, total)


def least_square(bounds: tuple[float, float]) -> float:
    """The least z^2 for z anywhere in `bounds`."""
    lo, hi = bounds
    return 0.0 if lo <= 0.0 <= hi else min(lo * lo, hi * hi)
