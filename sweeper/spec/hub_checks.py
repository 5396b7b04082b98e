"""An `hf:` dataset's settings held against what was read: every setting names something the
data holds, once, before any row becomes a prompt.

A `field` the split lacks is one problem (not one per row); a `field` whose column holds
numbers, lists or nulls says so, naming the column, the first such row and how many more (not
"no prompt", as if it were absent); a `category_field` the split lacks is refused rather than
grouping every prompt under none. Row problems (`row_problems`) are each said once, with the
count of the other rows they hit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sweeper.spec.datasets import DatasetSpec
from sweeper.spec.errors import SpecIssue
from sweeper.spec.hub import HubData

#: Columns that hold a conversation, not a prompt's text (`row_item` reads them as such).
CONVERSATIONS = frozenset({"messages", "conversations"})


def settings_problems(dataset: DatasetSpec, hub: HubData) -> list[tuple[str, str]]:
    """(the dataset entry's key to blame, one line) per setting the rows read do not fit."""
    given = dataset.model_fields_set
    columns = ", ".join(hub.columns) or "none"
    problems: list[tuple[str, str]] = []
    if "category_field" in given and dataset.category_field not in hub.columns:
        problems.append(
            ("category_field", f"{dataset.category_field!r} is not a column of {hub.where} "
             f"(columns: {columns})")
        )  # fmt: skip
    name = dataset.prompt_field
    if "prompt_field" not in given or dataset.template or name in CONVERSATIONS:
        return problems
    if name not in hub.columns:
        problems.append(("field", f"{name!r} is not a column of {hub.where} (columns: {columns})"))
        return problems
    bad = [(n, row.get(name)) for n, row in hub.rows if not _text(row.get(name))]
    if bad:
        number, value = bad[0]
        more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
        problems.append(
            ("field", f"column {name!r} of {hub.where} holds {_kind(value)} at row {number + 1}"
             f"{more}: a prompt column holds text")
        )  # fmt: skip
    return problems


def row_problems(issues: list[SpecIssue]) -> list[SpecIssue]:
    """Each row problem once per field (a setting wrong for one row is wrong for them all), with
    how many other rows it hit."""
    counts = Counter(issue.field for issue in issues)
    said: list[SpecIssue] = []
    for issue in issues:
        if any(s.field == issue.field for s in said):
            continue
        more = counts[issue.field] - 1
        tail = f" (and {more} more rows)" if more else ""
        said.append(issue._replace(message=issue.message + tail))
    return said


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _kind(value: Any) -> str:
    """What a cell holds instead of text, with its value when short."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "an empty string"
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"{type(value).__name__} {shown}"
