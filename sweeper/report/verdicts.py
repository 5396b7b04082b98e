"""Determinism verdict names, their severity order and their colours (one place for all three)."""

from __future__ import annotations

import pandas as pd

# Least to most severe; the matrix shows the worst verdict over a prompt's repeats.
SEVERITY = [
    "exact",
    "n/a",
    "near-tie",
    "missing",
    "nondeterministic",
    "diverged",
    "garbled",
    "failed",
]
# Verdicts a config may have and still count as correct: near-tie is numerics, not a bug.
OK_VERDICTS = frozenset({"exact", "near-tie", "n/a"})
# Verdicts whose outputs need no side-by-side view.
QUIET_VERDICTS = ("exact", "n/a")
COLOURS = {
    "exact": "#2e7d32",
    "n/a": "#cfd8dc",
    "near-tie": "#9ccc65",
    "missing": "#eeeeee",
    "nondeterministic": "#ffb300",
    "diverged": "#e53935",
    "garbled": "#6a1b9a",
    "failed": "#424242",
}


def worst_by_group(verdicts: pd.Series, keys: list[pd.Series]) -> pd.Series:
    """The worst verdict per group, vectorised (severity codes, max, back to names)."""
    names = verdicts.astype("string").fillna("missing")
    known = names.where(names.isin(SEVERITY), "diverged")
    codes = known.map({name: i for i, name in enumerate(SEVERITY)}).astype("int64")
    worst = codes.groupby(keys, observed=True).max()
    return worst.map(dict(enumerate(SEVERITY)))
