"""The null law of a sum of step functions of independent uniforms, by simulation.

A score summed over many positions, each a step function of a value that is uniform on [0, 1]
under the null (a randomized probability integral transform), is approximately normal; but a
step that is rare and large (a token far in a distribution's tail) skews it, most at small
sizes. Simulating the sum with fresh uniforms (seeded) gives its law as the steps make it, so
a p-value keeps its level where the normal approximation would not. Several sums on the same
uniforms (`simulated_joint_sums`) give their joint law.

numpy and the standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def simulated_sums(
    edges: Sequence[Sequence[float]],
    values: Sequence[Sequence[float]],
    draws: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """[draws] sums over the step functions of their value at an independent uniform each;
    step function i is `values[i][j]` on [edges[i][j-1], edges[i][j]) (edges ascending, the
    last 1)."""
    return simulated_joint_sums(edges, [values], draws, rng)[:, 0]


def simulated_joint_sums(
    edges: Sequence[Sequence[float]],
    values: Sequence[Sequence[Sequence[float]]],
    draws: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """[draws, K]: K sums on the same step edges and the same uniforms, sum k's step function i
    being `values[k][i]` (as `simulated_sums`, which is K = 1 with the same draws)."""
    total = np.zeros((draws, len(values)))
    for i, upper in enumerate(edges):
        at = np.searchsorted(np.asarray(upper), rng.random(draws), side="right")
        for k, by_position in enumerate(values):
            value = np.asarray(by_position[i])
            total[:, k] += value[np.minimum(at, len(value) - 1)]
    return total


def tail_p_values(
    observed_low: float, observed_high: float, sums: np.ndarray
) -> tuple[float, float]:
    """One-sided p-values from simulated sums: of a sum at least `observed_low` (large), and of
    one at most `observed_high` (small), each counting the observed among the draws."""
    n = sums.size
    large = (1 + int(np.sum(sums >= observed_low - 1e-12))) / (n + 1)
    small = (1 + int(np.sum(sums <= observed_high + 1e-12))) / (n + 1)
    return large, small
