"""Several statistics combined honestly: Westfall and Young's max-T on shared reshuffles.

Each statistic is standardised by its reshuffles' mean and spread (|z| where it is extreme both
ways), and the largest z of the observed row is ranked against the largest of every reshuffle,
so the combined p-value is exact whatever the statistics' correlation, with no Bonferroni or
Holm loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def max_t(stats: np.ndarray, two_sided: Sequence[bool]) -> tuple[float, tuple[float, ...]]:
    """The combined and per-statistic p-values of `stats`, [B + 1, K]: row 0 the observed
    statistics, rows 1.. those of B reshuffles; `two_sided[k]`: statistic k is extreme both
    ways (else only large). A statistic no reshuffle moves says nothing (z = 0)."""
    centred = stats - stats[1:].mean(axis=0)
    spread = stats[1:].std(axis=0)
    z = centred / np.where(spread > 0, spread, 1.0)
    z = np.where(np.asarray(two_sided, dtype=bool)[None, :], np.abs(z), z)
    z[:, spread <= 0] = 0.0
    per = tuple(float(np.mean(z[:, k] >= z[0, k] - 1e-12)) for k in range(stats.shape[1]))
    largest = z.max(axis=1)
    return float(np.mean(largest >= largest[0] - 1e-12)), per
