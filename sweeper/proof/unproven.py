"""What a run proved, in a few words for the end of `sweeper run`: how many points are
unproven and why (no verdict without a proof), grouped by reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from sweeper.config.labels import point_label_long


def unproven_lines(points: Iterable[Mapping[str, Any]], shown: int = 3) -> list[str]:
    """ "N point(s) unproven: ..." with the commonest reasons and an example point each; []
    when every ok point was proven or is a reference."""
    unproven = [p for p in points if p.get("status") == "ok" and p.get("determinism") == "unproven"]
    if not unproven:
        return []
    reasons = Counter(_short(p.get("unproven_reason")) for p in unproven)
    lines = [f"{len(unproven)} point(s) unproven (never feasible; nothing proves them right):"]
    for reason, count in reasons.most_common(shown):
        example = next(p for p in unproven if _short(p.get("unproven_reason")) == reason)
        lines.append(f"  {count} x {reason} (e.g. {point_label_long(example)})")
    if len(reasons) > shown:
        lines.append(f"  ... {len(reasons) - shown} more reason(s); see the report")
    return lines


def _short(reason: Any) -> str:
    text = str(reason or "no reason recorded")
    return text if len(text) <= 240 else text[:237] + "..."
