"""From one point's request rows to its point numbers and verdicts: the runner's single call into
the pure metric and determinism functions (`sweeper.metrics`, `sweeper.determinism`).

Until those modules exist this adapter computes the minimum itself (percentiles, throughput,
mean tau, speedup; exact/diverged/nondeterministic by token-id hashes), so a sweep records
usable points either way.
"""

from __future__ import annotations

import importlib.util
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

VIOLATIONS = ("diverged", "garbled", "nondeterministic")


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def numbers(rows: Sequence[Mapping[str, Any]], wall_s: float) -> dict[str, Any]:
    """Throughput, latency percentiles and mean tau of one point's successful requests."""
    good = [r for r in rows if not r.get("error")]
    out: dict[str, Any] = {"n_requests": len(rows)}
    tokens = sum(r["output_tokens"] for r in good)
    out["output_tok_s"] = tokens / wall_s if wall_s > 0 and good else None
    out["request_s"] = len(good) / wall_s if wall_s > 0 and good else None
    series = {
        "ttft": [r["ttft"] for r in good if r.get("ttft") is not None],
        "itl": [x for r in good for x in r.get("itls") or []],
        "e2e": [r["e2e"] for r in good if r.get("e2e") is not None],
    }
    for name, values in series.items():
        for q in (50, 90, 99):
            out[f"{name}_p{q}"] = _pct(values, q / 100)
    taus = [r["tau"] for r in good if r.get("tau") is not None]
    out["tau"] = statistics.fmean(taus) if taus else None
    return out


def verdicts(
    rows: Sequence[Mapping[str, Any]],
    baseline_rows: Sequence[Mapping[str, Any]] | None,
    *,
    near_tie_margin: float,
) -> tuple[str, list[tuple[str | None, int | None]]]:
    """The point's determinism status and, per row, (verdict, divergence index)."""
    by_prompt: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        by_prompt[r["prompt_id"]].add(r["sha256"])
    base: dict[str, Mapping[str, Any]] = {}
    for r in baseline_rows or []:
        base.setdefault(r["prompt_id"], r)
    per_row: list[tuple[str | None, int | None]] = []
    statuses = []
    for r in rows:
        if len(by_prompt[r["prompt_id"]]) > 1:
            per_row.append(("nondeterministic", None))
            statuses.append("nondeterministic")
            continue
        ref = base.get(r["prompt_id"])
        if r["temperature"] > 0 or ref is None or ref is r:
            per_row.append(("exact", None))
            statuses.append("exact")
            continue
        if ref["sha256"] == r["sha256"]:
            per_row.append(("exact", None))
            statuses.append("exact")
            continue
        ids, ref_ids = r["token_ids"], ref["token_ids"]
        index = next(
            (i for i, (a, b) in enumerate(zip(ids, ref_ids, strict=False)) if a != b),
            min(len(ids), len(ref_ids)),
        )
        margins = ref.get("top2_margins") or []
        tie = index < len(margins) and margins[index] < near_tie_margin
        verdict = "near-tie" if tie else "diverged"
        per_row.append((verdict, index))
        statuses.append(verdict)
    for worst in ("nondeterministic", "garbled", "diverged", "near-tie", "exact"):
        if worst in statuses:
            return worst, per_row
    return "n/a", per_row


def summarize(
    rows: Sequence[Mapping[str, Any]],
    wall_s: float,
    *,
    baseline_rows: Sequence[Mapping[str, Any]] | None,
    baseline_point: Mapping[str, Any] | None,
    near_tie_margin: float,
) -> tuple[dict[str, Any], list[tuple[str | None, int | None]]]:
    """Point fields (numbers, speedup, determinism) and per-row verdicts."""
    point = numbers(rows, wall_s)
    base_rate = (baseline_point or {}).get("output_tok_s")
    point["speedup"] = (
        point["output_tok_s"] / base_rate if base_rate and point["output_tok_s"] else None
    )
    status, per_row = verdicts(rows, baseline_rows, near_tie_margin=near_tie_margin)
    point["determinism"] = status
    return point, per_row


def core_functions_available() -> bool:
    """Whether sweeper-core's metrics and determinism modules exist yet."""
    return all(importlib.util.find_spec(m) for m in ("sweeper.metrics", "sweeper.determinism"))
