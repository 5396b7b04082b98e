"""What a run's records hold, read whole from every copy: nothing recorded is ever dropped.

A run keeps each point twice: its line in `points.jsonl` (the record) and its row in
`points.parquet` / `points.csv` (the views, rewritten after every point). A damaged line (a cut,
a bad sector, a hand edit) loses the record but not the view's row, and a damaged view loses
nothing the records hold. `recover` reads both and keeps the union: every intact record, then
every point and request that only a view still holds, and the lines that no copy can explain,
kept verbatim with their line numbers and why each is damaged (`reader.jsonl_lines`: not JSON,
or a field its record model refuses). It only reads; read commands use the result in memory,
and `sweeper repair` (`repair.py`) writes it back.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from sweeper.results.reader import (
    POINTS_CSV,
    POINTS_LOG,
    POINTS_PARQUET,
    REQUESTS_LOG,
    REQUESTS_PARQUET,
    SAMPLES_LOG,
    SCORES_LOG,
    SETTLED_LOG,
    jsonl_lines,
)
from sweeper.results.records import PointRecord, RequestRecord
from sweeper.statefile import RECORDS, check

#: The records a run appends, in the order a point writes them (settled lines come later).
RECORD_LOGS = (SAMPLES_LOG, SCORES_LOG, REQUESTS_LOG, POINTS_LOG, SETTLED_LOG)
_POINT_ID = re.compile(r'"point_id"\s*:\s*"([^"]*)"')


@dataclass(frozen=True)
class DamagedLine:
    """A line of a record file that is no record of it (kept verbatim, never deleted)."""

    file: str
    line: int
    text: str
    #: Why: not JSON, not an object, or the field its record model refused.
    why: str

    @property
    def said(self) -> str:
        """The line in words: `points.jsonl line 3: field concurrency: ...`."""
        return f"{self.file} line {self.line}: {self.why}"

    @property
    def point_id(self) -> str | None:
        """The point id the fragment still names, if it does."""
        found = _POINT_ID.search(self.text)
        return found.group(1) if found else None


@dataclass
class Recovery:
    """A run's records, whole: each file's intact rows, what only a view still held, and
    what no copy explains."""

    #: Intact rows per record file (its parsed lines, in order).
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Point rows found only in a view (their line in points.jsonl is damaged or missing).
    points_from_views: list[dict[str, Any]] = field(default_factory=list)
    #: Request rows found only in requests.parquet (their point's lines were damaged).
    requests_from_views: list[dict[str, Any]] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)

    @property
    def points(self) -> list[dict[str, Any]]:
        """Every recorded point once (a point's first line wins, as in the store)."""
        seen: dict[str, dict[str, Any]] = {}
        for row in [*self.rows.get(POINTS_LOG, []), *self.points_from_views]:
            if isinstance(row.get("point_id"), str):
                seen.setdefault(row["point_id"], row)
        return list(seen.values())

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Request rows of recorded points, from the attempt that completed."""
        return _of_points(self.points, self.rows.get(REQUESTS_LOG, []) + self.requests_from_views)

    @property
    def samples(self) -> list[dict[str, Any]]:
        return _of_points(self.points, self.rows.get(SAMPLES_LOG, []))

    @property
    def recovered_ids(self) -> list[str]:
        """Points whose rows came back from a view."""
        ids = [str(r["point_id"]) for r in self.points_from_views]
        ids += [str(r["point_id"]) for r in self.requests_from_views]
        return list(dict.fromkeys(ids))

    @property
    def lost(self) -> list[DamagedLine]:
        """Damaged lines no copy holds: a points line whose point is in no view (requests and
        samples lines count as lost only when their point's rows are short)."""
        recorded = {str(p["point_id"]) for p in self.points}
        points_damaged = [d for d in self.damaged if d.file == POINTS_LOG]
        return [d for d in points_damaged if d.point_id not in recorded]


def recover(run_dir: Path) -> Recovery:
    """Every copy of a run's records, merged (only reads)."""
    run_dir = Path(run_dir)
    recovery = Recovery()
    for name in RECORD_LOGS:
        rows, damaged = jsonl_lines(run_dir / name)
        recovery.rows[name] = rows
        recovery.damaged += [DamagedLine(name, *line) for line in damaged]
    # A view is read whole only when it can hold something the records lost: its footer's row
    # count (or a damaged record line) says so, so a sound run's resume reads no view.
    recorded = {r.get("point_id") for r in recovery.rows[POINTS_LOG]}
    points_cut = any(d.file == POINTS_LOG for d in recovery.damaged)
    views = _view_rows(run_dir / POINTS_PARQUET, len(recorded), always=points_cut)
    if points_cut and not views:
        views = _csv_rows(run_dir / POINTS_CSV)
    recovery.points_from_views = [
        _as_recorded(row, PointRecord) for row in views if row.get("point_id") not in recorded
    ]
    kept = {(p["point_id"], p.get("attempt")) for p in recovery.points}
    logged = Counter((r.get("point_id"), r.get("attempt")) for r in recovery.rows[REQUESTS_LOG])
    in_view: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in _view_rows(run_dir / REQUESTS_PARQUET, sum(logged[key] for key in kept)):
        in_view.setdefault((row.get("point_id"), row.get("attempt")), []).append(row)
    for key, rows in in_view.items():
        # The view was written from complete records: where it holds more of a point's
        # requests than the log does now, the log lost lines and the view's rows stand in.
        if key in kept and len(rows) > logged[key]:
            recovery.requests_from_views += [_as_recorded(row, RequestRecord) for row in rows]
    if recovery.requests_from_views:
        replaced = {(r["point_id"], r.get("attempt")) for r in recovery.requests_from_views}
        recovery.rows[REQUESTS_LOG] = [
            r
            for r in recovery.rows[REQUESTS_LOG]
            if (r.get("point_id"), r.get("attempt")) not in replaced
        ]
    return recovery


def damage_said(damaged: list[DamagedLine]) -> str:
    """The first damaged line in words, and how many more there are."""
    more = f" (and {len(damaged) - 1} more damaged line(s))" if len(damaged) > 1 else ""
    return damaged[0].said + more if damaged else ""


def _as_recorded(row: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """A view's row as its record was written: its fields read back through the record model
    (a view holds an integer column with nulls as floats, a CSV holds text: 8.0 and "8" are
    the budget 8, "False" is false), where the model refuses one, with the view's encoding of
    it undone (`_unencoded`). A row the model still refuses stays as the view holds it."""
    try:
        read = model.model_validate(row)
    except ValidationError as exc:
        try:
            read = model.model_validate(_unencoded(row, exc.errors()))
        except ValidationError:
            return row
    return read.model_dump(include=set(row))


def _unencoded(row: dict[str, Any], errors: list[Any]) -> dict[str, Any]:
    """The row with what its view's writers changed undone where the model refused it: a list
    a CSV holds as the text pandas wrote for it (its repr), a NaN in a list of numbers that
    parquet holds as a null (pyarrow writes a pandas NaN as a null)."""
    fixed = dict(row)
    for error in errors:
        name, *inside = error["loc"]
        if error["type"] == "list_type" and not inside and isinstance(row.get(name), str):
            fixed[name] = _literal(row[name])
        elif error["type"] == "float_type" and error["input"] is None and len(inside) == 1:
            fixed[name] = [math.nan if v is None else v for v in fixed[name]]
    return fixed


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _view_rows(path: Path, more_than: int, always: bool = False) -> list[dict[str, Any]]:
    """A parquet view's rows, nulls left out as the records write them, when its footer counts
    more than `more_than` rows (or `always`); opened once. Absent or unreadable: none."""
    try:
        check(path, RECORDS)  # a FIFO there would block pyarrow's open
        view = pq.ParquetFile(path)
    except (OSError, ValueError):  # ArrowInvalid is a ValueError
        return []
    try:
        if not always and view.metadata.num_rows <= more_than:
            return []
        return _rows(view.read())
    except (OSError, ValueError):
        return []
    finally:
        view.close()


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    """points.csv's rows, the last copy when points.parquet is unreadable: the record's
    columns as the CSV's text (`_as_recorded` reads them through the model; pyarrow's guess
    makes a timestamp of `started_at`), the others (extra grid flags) as pyarrow guesses."""
    import pyarrow.csv as pacsv

    try:
        check(path, RECORDS)
        guessed = pacsv.read_csv(path)
        names = guessed.column_names
        options = pacsv.ConvertOptions(
            column_types={name: pa.string() for name in names}, strings_can_be_null=True
        )
        texts = pacsv.read_csv(path, convert_options=options)
    except (OSError, ValueError):
        return []
    declared = PointRecord.model_fields
    return [
        {k: text.get(k, v) if k in declared else v for k, v in guess.items()}
        for guess, text in zip(_rows(guessed), _rows(texts), strict=True)
    ]


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]


def _of_points(points: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = {(p["point_id"], p.get("attempt")) for p in points}
    return [r for r in rows if (r.get("point_id"), r.get("attempt")) in keep]
