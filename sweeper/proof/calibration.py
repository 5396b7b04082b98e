"""Near-ties calibrated against an AR-vs-AR control, not waved through.

A divergence where the baseline's top-2 margin is small is called `near-tie`: numerics, not a
bug. But a bug that flips tokens only where margins are small looks the same. The control: the
same AR server at another batch shape (its other request configs: concurrency or rate) against
itself at its first one, request by request (same prompt, repeat, restart). Its flip rate is
what numerics alone do here; a speculative config whose near-tie rate exceeds the control's
(above its 95% upper bound, so a small control does not flag noise) is `flagged`, and its
near-ties count as broken: in the diagnosis, and in every judge of a run (`calibrated_points`:
the exit code, `best`, the search's constraint, the report, `compare`). Sampled near-ties (a
coupled divergence at a tiny sample margin) are not calibrated: the control compares greedy
outputs.

Pure: request rows in (token ids by `sha256`), rates out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweeper.config import SPECULATIVE_KEYS, temperature_of
from sweeper.config.labels import point_label
from sweeper.results.reader import Run
from sweeper.results.rows import is_missing
from sweeper.stats.intervals import wilson_upper

#: The request-config columns that make another batch shape of the same request.
_SHAPE = ("concurrency", "rate", "arrival", "burstiness", "max_concurrency")


@dataclass(frozen=True)
class Control:
    """AR against itself at other batch shapes: pairs compared and how many differed."""

    pairs: int
    flips: int

    @property
    def rate(self) -> float:
        return self.flips / self.pairs if self.pairs else 0.0

    @property
    def upper(self) -> float:
        """The rate's 95% upper bound (Wilson score), so 0 of 8 is not read as 0 of 8000."""
        return wilson_upper(self.flips, self.pairs)


@dataclass(frozen=True)
class NearTieRate:
    """One speculative config's near-ties among its greedy judged requests."""

    label: str
    requests: int
    near_ties: int
    flagged: bool

    @property
    def rate(self) -> float:
        return self.near_ties / self.requests if self.requests else 0.0


def _greedy(row: Mapping[str, Any]) -> bool:
    return temperature_of(row) == 0.0


def _value(row: Mapping[str, Any], column: str) -> Any:
    value = row.get(column)
    return None if is_missing(value) else value


def ar_control(rows: Iterable[Mapping[str, Any]]) -> Control | None:
    """The AR baseline's flips across its batch shapes (None: it has only one shape)."""
    groups: dict[tuple[Any, ...], dict[tuple[Any, ...], str]] = {}
    for row in rows:
        if str(row.get("mode")) != "ar" or not _greedy(row) or _value(row, "error"):
            continue
        request = tuple(_value(row, c) for c in ("host", "prompt_id", "repeat", "max_tokens"))
        request += (_value(row, "restart") or 0,)
        shape = tuple(_value(row, c) for c in _SHAPE)
        groups.setdefault(request, {})[shape] = str(row.get("sha256"))
    pairs = flips = 0
    for shapes in groups.values():
        if len(shapes) < 2:
            continue
        first, *others = sorted(shapes.items(), key=lambda item: str(item[0]))
        pairs += len(others)
        flips += sum(sha != first[1] for _, sha in others)
    return Control(pairs, flips) if pairs else None


def near_tie_rates(
    rows: Iterable[Mapping[str, Any]], control: Control | None
) -> dict[str, NearTieRate]:
    """Per speculative config (label): its near-tie rate, flagged when above the control's
    upper bound (never flagged without a control: nothing to calibrate against)."""
    counts: dict[str, list[int]] = {}
    for row in rows:
        if str(row.get("mode")) == "ar" or not _greedy(row):
            continue
        verdict = _value(row, "verdict")
        if verdict is None or verdict == "n/a":
            continue
        tally = counts.setdefault(point_label(row), [0, 0])
        tally[0] += 1
        tally[1] += verdict == "near-tie"
    return {
        label: NearTieRate(
            label,
            n,
            ties,
            control is not None and ties > 0 and ties / n > control.upper,
        )
        for label, (n, ties) in counts.items()
    }


def calibration_text(control: Control | None, rates: Mapping[str, NearTieRate]) -> str:
    """One sentence on the near-ties against the control ("" when no config has near-ties)."""
    tied = [r for r in rates.values() if r.near_ties]
    if not tied:
        return ""
    if control is None:
        return (
            f"Near-ties in {len(tied)} config(s), uncalibrated: the AR baseline ran at one batch "
            "shape, so there is no AR-vs-AR control to say what numerics alone flip here."
        )
    head = (
        f"Near-ties against the AR-vs-AR control ({control.flips} of {control.pairs} pairs "
        f"flipped, 95% upper bound {control.upper:.1%})"
    )
    flagged = [r for r in tied if r.flagged]
    if not flagged:
        return f"{head}: no config above it, so its near-ties stay numerics."
    named = ", ".join(
        f"{r.label} {r.near_ties} of {r.requests} ({r.rate:.0%})"
        for r in sorted(flagged, key=lambda r: -r.rate)
    )
    return f"{head}: above it, so their near-ties count as violations: {named}."


#: The request columns the calibration reads (the control's pairs, the configs' labels).
CALIBRATION_COLUMNS = (
    "mode",
    "temperature",
    "verdict",
    "error",
    "host",
    "prompt_id",
    "repeat",
    "max_tokens",
    "restart",
    "sha256",
    *_SHAPE,
    *SPECULATIVE_KEYS,
    "cuda_graph",
)


def excess_labels(requests: Iterable[Mapping[str, Any]]) -> set[str]:
    """The configs (labels) whose near-ties exceed the AR-vs-AR control's upper bound."""
    rows = list(requests)
    return {label for label, rate in near_tie_rates(rows, ar_control(rows)).items() if rate.flagged}


#: What `calibrated_points` adds to a row: derived per point, never a grid flag.
CALIBRATED_COLUMNS = ("near_tie_excess",)


def calibrated_points(
    points: Iterable[Mapping[str, Any]], requests: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The point rows as every judge reads them: a speculative point whose determinism is
    `near-tie` in a config above the control (`excess_labels`) reads `diverged`, with
    `near_tie_excess` True, so the run's exit code, `best`, the search's constraint, the
    report and `compare` count its near-ties as violations, as `diagnose` does."""
    flagged = excess_labels(requests)
    out = []
    for point in points:
        row = dict(point)
        excess = (
            bool(flagged)
            and row.get("determinism") == "near-tie"
            and str(row.get("mode")) != "ar"
            and point_label(row) in flagged
        )
        if excess:
            row["determinism"] = "diverged"
        row["near_tie_excess"] = excess
        out.append(row)
    return out


def calibrated_frame(points: pd.DataFrame, run: Run) -> pd.DataFrame:
    """A run's points frame with the calibration applied (`calibrated_points`)."""
    if points.empty or "determinism" not in points:
        return points
    requests = run.requests(list(CALIBRATION_COLUMNS), categorical=False)
    if requests.empty:
        return points.assign(near_tie_excess=False)
    rows = calibrated_points(points.to_dict("records"), requests.to_dict("records"))
    out = points.copy()
    out["determinism"] = [r["determinism"] for r in rows]
    out["near_tie_excess"] = [r["near_tie_excess"] for r in rows]
    return out
