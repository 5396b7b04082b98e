"""Request records as plain rows: the shared reading of the records table by the pure modules.

Records arrive as a list of mappings (fresh from the client) or as a DataFrame (read back from
requests.parquet, where a missing value is NaN and a list is a numpy array).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.config.columns import is_missing


def rows_of(records: Any) -> list[Mapping[str, Any]]:
    """Mappings from a list of records or a DataFrame; None means no records."""
    if records is None:
        return []
    if hasattr(records, "to_dict"):
        return list(records.to_dict("records"))
    return list(records)


def is_failed(row: Mapping[str, Any]) -> bool:
    """A request that ended in an error (a non-empty `error`)."""
    error = row.get("error")
    return not is_missing(error) and error != ""


def choice_of(row: Mapping[str, Any]) -> int:
    """Which choice of its request a row holds (`n` > 1); 0 where the row has none (n = 1, and
    every run written before the `choice` column)."""
    choice = row.get("choice")
    return 0 if choice is None or is_missing(choice) else int(choice)


def request_rows_of(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One row per request (its choice 0): what per-request numbers (timing, request rate,
    acceptance, exposure, goodput) count, while output tokens count every choice's row."""
    return [row for row in rows if choice_of(row) == 0]
