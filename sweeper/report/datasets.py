"""The report's per-dataset section: the papers' table (dataset x temperature: speedup, tau,
acceptance histogram; a speedup that is no result marked `[impossible]` or `[busy]` beside it) from
the run's dataset points, and the points whose output lengths were not held. Shaped here, rendered
by `datasets.html.j2`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from sweeper.analysis.datasets import (
    DATASET_REQUEST_COLUMNS,
    dataset_points,
    dataset_table,
    has_datasets,
)
from sweeper.config.labels import point_label_long
from sweeper.report.formatting import fmt
from sweeper.results.reader import Run


@dataclass
class DatasetSection:
    """Column heads (temperatures), rows (labels + cells), and notes on lengths not held."""

    row_heads: list[str]
    temperatures: list[str]
    rows: list[tuple[list[str], list[str]]]
    length_notes: list[str] = field(default_factory=list)


def dataset_section(run: Run, points: pd.DataFrame) -> DatasetSection | None:
    """The section, or None when the run's requests name no dataset."""
    requests = run.requests(DATASET_REQUEST_COLUMNS, categorical=False)
    if not has_datasets(requests):
        return None
    table = dataset_table(dataset_points(points, requests))
    notes = [
        f"{point_label_long(row)}: {row['length_note']}"
        for row in points.to_dict("records")
        if row.get("length_note")
    ]
    if table.empty:
        return DatasetSection([], [], [], notes)
    heads = [str(n) for n in table.index.names]
    temperatures = [f"T={t:g}" for t in dict.fromkeys(t for t, _ in table.columns)]
    rows = []
    for index, values in table.iterrows():
        labels = [str(v) for v in (index if isinstance(index, tuple) else (index,))]
        cells = [
            _cell(metric, value)
            + _withheld(values.get((t, "withheld")) if metric == "speedup" else None)
            for (t, metric), value in values.items()
            if metric != "withheld"
        ]
        rows.append((labels, cells))
    return DatasetSection(heads, temperatures, rows, notes)


def _withheld(kind: Any) -> str:
    """A speedup that is no result, marked beside it: ` [impossible]`, ` [busy]`."""
    return f" [{kind}]" if isinstance(kind, str) and kind else ""


def _cell(metric: str, value: Any) -> str:
    if metric == "acceptance":
        return "" if value is None or (isinstance(value, float) and pd.isna(value)) else value
    return fmt(value, 2) + ("x" if metric == "speedup" and pd.notna(value) else "")
