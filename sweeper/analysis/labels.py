"""How a point reads for people: one label recipe for the report, compare and diagnosis.

`AR`, `AR cg`, `b16 k4 bs8 cg`; a speculative key the config does not have (its engine's
mapping does not use it) is left out, so a vLLM n-gram config reads `b4`, not `b4 k- bs-`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sweeper.results.rows import is_missing, tree_label_parts


def point_label(row: Mapping[str, Any]) -> str:
    """The server config of a point row, short."""
    is_ar = str(row.get("mode", "")) == "ar"
    parts = ["AR"] if is_ar else (tree_label_parts(row) or ["spec"])
    graph = row.get("cuda_graph")
    if not is_missing(graph) and bool(graph):
        parts.append("cg")
    return " ".join(parts)


def load_label(row: Mapping[str, Any]) -> str:
    """A point's load: `c=4` (closed loop), `r=2/s`, `r=inf`, `r=2/s gamma0.5`, `r=2/s m8`."""
    rate = _value(row, "rate")
    if is_missing(rate):
        concurrency = _value(row, "concurrency")
        return f"c={1 if is_missing(concurrency) else int(concurrency)}"
    parts = [f"r={float(rate):g}" + ("" if math.isinf(float(rate)) else "/s")]
    arrival = _value(row, "arrival")
    if not is_missing(arrival) and arrival != "poisson":
        burstiness = _value(row, "burstiness")
        shape = "" if is_missing(burstiness) else f"{float(burstiness):g}"
        parts.append(f"{arrival}{shape if arrival == 'gamma' else ''}")
    limit = _value(row, "max_concurrency")
    if not is_missing(limit):
        parts.append(f"m{int(limit)}")
    return " ".join(parts)


def point_label_long(row: Mapping[str, Any]) -> str:
    """The server config and the request config of a point row."""
    temperature = _value(row, "temperature")
    t = 0.0 if is_missing(temperature) else float(temperature)
    return f"{point_label(row)} T={t:g} {load_label(row)}"


def _value(row: Mapping[str, Any], key: str) -> Any:
    return row.get(key)
