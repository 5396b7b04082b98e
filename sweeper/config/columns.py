"""Which record columns say what a server config is: the named server keys (each distinct
combination a restart), the speculative ones and how each reads in a label, and how a missing
value reads (a DataFrame writes None as NaN). The record schemas (`sweeper.results.records`)
declare these columns; this is the list they are checked against.
"""

from __future__ import annotations

from typing import Any

#: The named server keys, in column order: each distinct combination is a restart.
SERVER_KEYS: tuple[str, ...] = ("budget", "topk", "block_size", "cuda_graph")
#: The named server keys that only speculative decoding has (the tree's shape; an engine's
#: mapping says which of them it uses), and how each reads in a label: `b16-k4-bs8`.
LABEL_PREFIXES: dict[str, str] = {"budget": "b", "topk": "k", "block_size": "bs"}
SPECULATIVE_KEYS: tuple[str, ...] = tuple(k for k in SERVER_KEYS if k in LABEL_PREFIXES)


def is_missing(value: Any) -> bool:
    """None, or NaN as a DataFrame writes a missing value."""
    return value is None or (isinstance(value, float) and value != value)


#: The param of the AR config started as the speed baseline (`runtime.speed_baseline`); a column.
SPEED_BASELINE = "speed_baseline"
