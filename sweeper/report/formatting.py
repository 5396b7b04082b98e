"""Number formatting shared by the HTML report and the terminal tables (no plotting imports)."""

from __future__ import annotations

import math
from typing import Any


def _bad(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: Any, digits: int = 2) -> str:
    """A number with `digits` decimals, or an em dash when absent."""
    if _bad(value):
        return "\u2014"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def ms(seconds: Any) -> str:
    """Seconds shown as milliseconds."""
    return "\u2014" if _bad(seconds) else fmt(float(seconds) * 1000, 1)


def pct(ratio: Any) -> str:
    """A relative change shown as a signed percentage."""
    return "\u2014" if _bad(ratio) else f"{float(ratio) * 100:+.1f}%"
