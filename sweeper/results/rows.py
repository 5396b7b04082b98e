"""Request records as plain rows: the shared reading of the records table by the pure modules.

Records arrive as a list of mappings (fresh from the client) or as a DataFrame (read back from
requests.parquet, where a missing value is NaN and a list is a numpy array).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweeper.results.records import LABEL_PREFIXES


def rows_of(records: Any) -> list[Mapping[str, Any]]:
    """Mappings from a list of records or a DataFrame; None means no records."""
    if records is None:
        return []
    if hasattr(records, "to_dict"):
        return list(records.to_dict("records"))
    return list(records)


def is_missing(value: Any) -> bool:
    """None, or NaN as a DataFrame writes a missing value."""
    return value is None or (isinstance(value, float) and value != value)


def is_failed(row: Mapping[str, Any]) -> bool:
    """A request that ended in an error (a non-empty `error`)."""
    error = row.get("error")
    return not is_missing(error) and error != ""


def tree_label_parts(values: Mapping[str, Any]) -> list[str]:
    """The one label recipe for a config's tree shape: `["b16", "k4", "bs8"]`, for the
    speculative keys it has (a key its engine's mapping does not use is absent or missing).
    Point ids join these with "-", the report with " "."""
    return [
        f"{prefix}{int(values[key])}"
        for key, prefix in LABEL_PREFIXES.items()
        if key in values and not is_missing(values[key])
    ]
