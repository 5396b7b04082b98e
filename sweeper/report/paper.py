"""The paper-layout table (`paper_layout`) as the report's section, as markdown and as CSV
(`sweeper report --table paper`). One shaping (`paper_grid`): heads and text cells that all
three print, so the HTML and the markdown read alike.

A cell reads as the papers print it, `6.75x / 9.54` (speedup over AR / tau), with `±` the 95%
interval's half-width over restarts, and with `by="method"` the config it shows. A reference adds
a column of the published figures beside each of its methods' columns; a tau flagged low is
marked (`tau low` in text, red in HTML); a speedup that is no result (busy, or impossible: above
its tau) is marked `[busy]` / `[impossible]` (struck through in HTML, why on hover). The CSV is
long: one line per cell, every number.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import pandas as pd

from sweeper.analysis.datasets import DATASET_REQUEST_COLUMNS, dataset_points, has_datasets
from sweeper.analysis.objective import Interval, withheld_kind
from sweeper.report.paper_layout import By, PaperCell, PaperTable, paper_table, reference_of
from sweeper.results.reader import Run

#: What a flagged tau carries in text.
TAU_LOW = "tau low"


@dataclass(frozen=True)
class GridCell:
    """One printed cell: its text, and whether it is flagged."""

    text: str
    flagged: bool = False
    reference: bool = False
    #: Why its speedup is no result ("" when it is one).
    withheld: str = ""


@dataclass(frozen=True)
class PaperGrid:
    """The table as printed: column heads, rows (None: a temperature block's head row, with its
    title), notes and flags."""

    heads: list[str]
    #: How many of a row's cells are its group's (host, load) before the dataset.
    groups: int
    rows: list[tuple[str, list[GridCell]] | tuple[None, str]]
    notes: list[str]
    flags: list[str]


def run_paper_table(run: Run, points: pd.DataFrame, by: By = "method") -> PaperTable | None:
    """The run's paper table (None when its requests name no dataset), held against the
    spec's reference."""
    requests = run.requests(DATASET_REQUEST_COLUMNS, categorical=False)
    if not has_datasets(requests):
        return None
    spec = run.manifest.spec if run.manifest else {}
    served = (spec.get("runtime") or {}).get("model")
    return paper_table(dataset_points(points, requests), by, reference_of(spec), served)


def paper_grid(table: PaperTable) -> PaperGrid:
    """Heads and text cells (see the module docstring)."""
    with_reference = table.reference_columns
    heads = [*table.group_heads, "dataset"]
    for column in table.columns:
        heads.append(table.titles.get(column, column))
        if column in with_reference:
            heads.append(f"{table.titles.get(column, column)} (reference)")
    rows: list[tuple[str, list[GridCell]] | tuple[None, str]] = []
    temperature = None
    for row in table.rows:
        if row.temperature != temperature:
            temperature = row.temperature
            rows.append((None, f"Temperature = {temperature:g}"))
        cells = [GridCell(g) for g in row.group]
        for column in table.columns:
            cell = row.cells.get(column)
            cells.append(_measured(cell, table.by))
            if column in with_reference:
                published = cell.reference if cell is not None else None
                text = _pair(published.speedup, published.tau) if published else "\u2014"
                cells.append(GridCell(text, reference=True))
        rows.append((row.title, cells))
    return PaperGrid(heads, len(table.group_heads), rows, _notes(table), list(table.flags))


def paper_markdown(table: PaperTable) -> str:
    """The table in markdown, its notes and flags below it."""
    grid = paper_grid(table)
    out = ["| " + " | ".join(grid.heads) + " |", "|" + "---|" * len(grid.heads)]
    width = len(grid.heads)
    for label, cells in grid.rows:
        if label is None:
            out.append("| " + f"*{cells}*" + " |" * width)
            continue
        assert isinstance(cells, list)
        texts = [_marked(c) for c in cells]
        groups = len(table.group_heads)
        out.append("| " + " | ".join([*texts[:groups], label, *texts[groups:]]) + " |")
    out.append("")
    out += [f"- {note}" for note in grid.notes]
    out += [f"- **flag**: {flag}" for flag in grid.flags]
    return "\n".join(out) + "\n"


def paper_csv(table: PaperTable) -> str:
    """One line per cell: the config, every number with its interval, the reference's, the flag."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            *table.group_heads,
            "temperature",
            "dataset",
            "column",
            "method",
            "config",
            "speedup",
            "speedup_low",
            "speedup_high",
            "tau",
            "tau_low",
            "tau_high",
            "restarts",
            "reference_speedup",
            "reference_tau",
            "tau_flagged",
            "speedup_withheld",
        ]
    )
    for row in table.rows:
        for column in table.columns:
            cell = row.cells.get(column)
            if cell is None:
                continue
            published = cell.reference
            writer.writerow(
                [
                    *row.group,
                    f"{row.temperature:g}",
                    row.dataset,
                    column,
                    cell.method,
                    cell.config,
                    *_numbers(cell.speedup),
                    *_numbers(cell.tau)[:3],
                    max((i.n for i in (cell.speedup, cell.tau) if i is not None), default=0),
                    _num(published.speedup if published else None),
                    _num(published.tau if published else None),
                    int(cell.tau_low),
                    cell.withheld,
                ]
            )
    return buffer.getvalue()


def _measured(cell: PaperCell | None, by: By) -> GridCell:
    if cell is None:
        return GridCell("\u2014")
    text = _pair(cell.speedup, cell.tau)
    if by == "method" and cell.method != "ar":
        text += f" ({cell.config})"
    if cell.withheld:
        text += f" [{withheld_kind(cell.withheld)}]"
    return GridCell(text, flagged=cell.tau_low, withheld=cell.withheld)


def _pair(speedup: Interval | float | None, tau: Interval | float | None) -> str:
    return f"{_value(speedup, 'x')} / {_value(tau, '')}"


def _value(value: Interval | float | None, unit: str) -> str:
    if value is None:
        return "\u2014"
    if isinstance(value, Interval):
        text = f"{value.mean:.2f}{unit}"
        if value.high is not None:
            text += f" \u00b1{value.high - value.mean:.2f}"
        return text
    return f"{float(value):.2f}{unit}"


def _marked(cell: GridCell) -> str:
    return f"**{cell.text}** ({TAU_LOW})" if cell.flagged else cell.text


def _numbers(interval: Interval | None) -> list[str]:
    if interval is None:
        return ["", "", ""]
    return [_num(interval.mean), _num(interval.low), _num(interval.high)]


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _notes(table: PaperTable) -> list[str]:
    notes = [
        "speedup / tau: output tokens over summed request time, over the AR baseline's on the "
        "same prompts, host, temperature and load / output tokens per verify round",
    ]
    if table.by == "method":
        notes.append(
            "each method's cell shows its config with the best speedup on that dataset (the "
            "DDTree paper's entry is its best node budget); chain: one drafted path per step, "
            "tree: several children per node"
        )
    if any(c.withheld for r in table.rows for c in r.cells.values()):
        notes.append(
            "[impossible]: a speedup above its own tau (a verify round costs at least one AR step "
            "and emits tau tokens, so its AR baseline ran slower than the config's steps allow: "
            "measured at a busier moment); [busy]: measured on a busy host, either side; neither "
            "is a method's best while another of its configs has a speedup that is a result"
        )
    if any(c.speedup and c.speedup.high is not None for r in table.rows for c in r.cells.values()):
        notes.append("\u00b1: the 95% interval's half-width over the config's restarts")
    reference = table.reference
    if reference is not None and reference.table is not None:
        ref = reference.table
        about = ", ".join(x for x in (ref.model, ref.drafter) if x)
        parts = [f"reference: {ref.name}" + (f" ({about})" if about else ""), ref.source]
        parts += [ref.setup] if ref.setup else []
        parts.append(
            f"a tau more than {reference.tolerance:.0%} below the reference's is flagged; "
            "speedups depend on the hardware and are never flagged"
        )
        notes.append("; ".join(parts))
    if table.model_note:
        notes.append(table.model_note)
    return notes
