"""A point's exposure columns from its requests': which code paths its requests went through.

Counts are summed, largest sizes (`extent` factors) are maxed, accepted-length histograms are
added. An engine that counts acceptance per server (vLLM's per-position counters, read around
the point as `accepted_at_<i>`) gives the point's histogram even when no request carried one.
Whatever no request reported stays None, and `exposure_note` names it: unknown is never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.results.records import EXPOSURE_COLUMNS, factor_kinds
from sweeper.results.rows import is_failed, is_missing, request_rows_of

#: Exposure columns whose point value is the largest of its requests' (the rest are summed).
_LARGEST = {c for c, kind in factor_kinds(EXPOSURE_COLUMNS).items() if kind == "extent"}
HISTOGRAM = "accepted_hist"


def add_histograms(histograms: Sequence[Sequence[int]]) -> list[int]:
    """Element-wise sum of histograms of any lengths."""
    total: list[int] = []
    for hist in histograms:
        if len(hist) > len(total):
            total.extend([0] * (len(hist) - len(total)))
        for index, count in enumerate(hist):
            total[index] += int(count)
    return total


def histogram_from_positions(counters: Mapping[str, float]) -> list[int] | None:
    """Accepted-length histogram from per-position counts: `accepted_at_<i>` drafts accepted at
    least i + 1 tokens, of `drafts` in all (accepted tokens are a prefix of the draft)."""
    positions = sorted(int(k.rsplit("_", 1)[1]) for k in counters if k.startswith("accepted_at_"))
    drafts = counters.get("drafts")
    if not positions or not drafts or positions != list(range(len(positions))):
        return None
    at_least = [int(drafts)] + [int(counters[f"accepted_at_{i}"]) for i in positions]
    at_least.append(0)
    return [at_least[a] - at_least[a + 1] for a in range(len(positions) + 1)]


def point_exposure(
    rows: Sequence[Mapping[str, Any]],
    counters: Mapping[str, float] | None,
    engine: str,
) -> dict[str, Any]:
    """The point's exposure columns and `exposure_note` (see the module docstring), from one
    row per request (`request_rows_of`: a request's exposure is on its choice-0 row)."""
    answered = [r for r in request_rows_of(rows) if not is_failed(r)]
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for column in EXPOSURE_COLUMNS:
        values: list[Any] = [r.get(column) for r in answered]
        known: list[Any] = [v for v in values if not _absent(v)]
        if column == HISTOGRAM:
            from_counters = histogram_from_positions(counters or {})
            if known and len(known) == len(values):
                out[column] = add_histograms(known)
            elif from_counters is not None:
                out[column] = from_counters
            else:
                out[column] = None
        elif known and len(known) == len(values):
            numbers = [int(v) for v in known]
            out[column] = max(numbers) if column in _LARGEST else sum(numbers)
        else:
            out[column] = None
        if answered and out[column] is None:
            unknown.append(column)
    note = ""
    if unknown:
        note = f"not reported by engine {engine} (unknown, not 0): {', '.join(unknown)}"
    return {**out, "exposure_note": note}


def _absent(value: Any) -> bool:
    if value is None:
        return True
    return not hasattr(value, "__len__") and is_missing(value)
