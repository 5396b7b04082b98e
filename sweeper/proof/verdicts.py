"""Determinism verdicts: their names, one severity order, colours, and the ok / violation sets.

The one place these are defined: the determinism judge, the runner's exit code, the points
table's worst verdict, the report's matrix and `compare` all derive from here, so a point's
`determinism` column and the report can never name different worst verdicts for the same point.

The order answers "how much attention does this need": `exact` (proven identical, token for
token, greedy or coupled sampling at the same seed) < `near-tie` (a difference explained by
numerics) < `distribution-ok` (sampled outputs that a two-sample test with stated power could
not tell from the AR baseline's: proven in distribution, not token for token) < `n/a` (a request
nothing was compared with: the baseline itself, a failed request) < `unproven` (a config none of
whose outputs were compared with anything: no baseline, unseeded, a test too weak to detect a
useful shift; never feasible, never a violation) < `shifted` (sampled outputs whose distribution
differs from the target's: a test's rejection at its alpha) < `impossible-token` (a sampled token
the target's processed distribution gives probability 0: a proof, at one token) < `diverged`
(deterministic wrong output) < `nondeterministic` (temperature 0 is not even self-consistent) <
`garbled` (visibly corrupt text, the worst a user can see).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

import pandas as pd

# The names, least to most severe, are the records' (a verdict column holds one of them).
from sweeper.results.records import Verdict

SEVERITY: tuple[Verdict, ...] = get_args(Verdict)
#: Verdicts that prove a request or a config right (feasible; the diagnosis's clean requests):
#: near-tie is numerics, not a bug; distribution-ok is a test's pass at a stated power.
CLEAN_VERDICTS: frozenset[str] = frozenset({"exact", "near-tie", "distribution-ok"})
#: Verdicts that make `sweeper run` exit 4, `compare` call determinism broken and a config
#: infeasible.
VIOLATIONS: frozenset[str] = frozenset(
    {"shifted", "impossible-token", "diverged", "nondeterministic", "garbled"}
)
#: Verdicts that prove nothing either way: never feasible, never a violation.
UNJUDGED: frozenset[str] = frozenset({"n/a", "unproven"})
#: Verdicts with no violation found, proven or not.
OK_VERDICTS: frozenset[str] = frozenset(SEVERITY) - VIOLATIONS
assert set(SEVERITY) == CLEAN_VERDICTS | VIOLATIONS | UNJUDGED, "a verdict in no set"
#: How a recorded verdict stands, least to most attention: `damaged` is a record, not a verdict.
Standing = Literal["proven", "unjudged", "damaged", "violation"]
STANDINGS: tuple[Standing, ...] = get_args(Standing)
#: Verdicts whose outputs need no side-by-side view.
QUIET_VERDICTS: tuple[Verdict, ...] = ("exact", "distribution-ok", "n/a", "unproven")
#: Matrix cells that are no verdict: no record for the cell / the whole point failed.
MISSING, FAILED = "missing", "failed"
#: What a report matrix cell can show, least to most severe.
MATRIX_STATES: tuple[str, ...] = (MISSING, *SEVERITY, FAILED)
COLOURS: dict[str, str] = {
    "missing": "#eeeeee",
    "exact": "#2e7d32",
    "near-tie": "#9ccc65",
    "distribution-ok": "#26a69a",
    "n/a": "#cfd8dc",
    "unproven": "#8d6e63",
    "shifted": "#f4511e",
    "impossible-token": "#d81b60",
    "diverged": "#e53935",
    "nondeterministic": "#ffb300",
    "garbled": "#6a1b9a",
    "failed": "#424242",
}


def standing(verdict: object) -> Standing:
    """How a recorded verdict (a point's `determinism`, a request's `verdict`) stands: the one
    definition of proven that every feasibility decision reads (best, the search, the report's
    answer and front, compare, nightly, bisect, the exit code). `proven` only for a clean
    verdict; a value that is missing (None, NaN, an absent column), not a string or no
    verdict's name is `damaged`: a damaged record, never clean, never read as a verdict."""
    if not isinstance(verdict, str) or verdict not in SEVERITY:
        return "damaged"
    if verdict in CLEAN_VERDICTS:
        return "proven"
    return "violation" if verdict in VIOLATIONS else "unjudged"


def proven(verdict: object) -> bool:
    """Whether a recorded verdict proves its point right (`standing`): a clean verdict only."""
    return standing(verdict) == "proven"


def verdict_damage(verdict: object) -> str:
    """Why a recorded verdict is no verdict, in a few words ("" when it is one): what a reader
    names beside the point it damages."""
    if standing(verdict) != "damaged":
        return ""
    if pd.api.types.is_scalar(verdict) and pd.isna(verdict):
        return "no determinism recorded"
    return f"determinism {verdict!r} is no verdict"


def worst(verdicts: Iterable[str]) -> Verdict:
    """The most severe verdict (`n/a` when there is none)."""
    found = set(verdicts)
    return next((v for v in reversed(SEVERITY) if v in found), "n/a")


def worst_by_group(verdicts: pd.Series, keys: list[pd.Series]) -> pd.Series:
    """The worst matrix state per group, vectorised (severity codes, max, back to names).

    A missing value is `missing`; an unknown name counts as `diverged` (never hidden as fine).
    """
    names = verdicts.astype("string").fillna(MISSING)
    known = names.where(names.isin(MATRIX_STATES), "diverged")
    codes = known.map({name: i for i, name in enumerate(MATRIX_STATES)}).astype("int64")
    most = codes.groupby(keys, observed=True).max()
    return most.map(dict(enumerate(MATRIX_STATES)))
