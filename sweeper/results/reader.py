"""The one reader of run directories: a `Run` (manifest, points, request columns, the views'
health), the names of a run directory's files, and finding runs.

Everything that reads a run directory after the fact (report, compare, diagnose, ls, best,
nightly, resume) reads one `Run`, made once and handed down, so a partial run reads the same
everywhere and no file is opened twice. Readers never raise on a partial or older
run: an absent or unreadable file gives None or an empty frame, and the caller says what is
missing. Run ids start with a UTC timestamp, so sorting run directory names sorts runs by start
time. A run counts as finished when its manifest says `complete` (every planned point attempted,
even if some failed: comparing them is how new failures are found).
"""

from __future__ import annotations

import io
import json
import reprlib
import shutil
from functools import cached_property
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from sweeper.results.lock import live_holder
from sweeper.results.manifest import DEFAULT_ENGINE, Manifest, legacy_mode
from sweeper.results.records import PointRecord, RequestRecord, SampleRecord, Verdict
from sweeper.results.scores import (
    ScoreRecord,
    SettledRecord,
    current_scores,
    settled_points,
)
from sweeper.statefile import MANIFEST as MANIFEST_KIND
from sweeper.statefile import RECORDS, check, read_state

MANIFEST = "manifest.json"
REQUESTS_LOG = "requests.jsonl"
POINTS_LOG = "points.jsonl"
POINTS_PARQUET = "points.parquet"
POINTS_CSV = "points.csv"
REQUESTS_PARQUET = "requests.parquet"
SAMPLES_LOG = "samples.jsonl"
SCORES_LOG = "scores.jsonl"
SETTLED_LOG = "settled.jsonl"
#: The views rewritten from the append-only records (never the source of truth).
DERIVED_VIEWS = (POINTS_PARQUET, POINTS_CSV, REQUESTS_PARQUET)
#: Request columns read as categoricals: repeated strings, a fraction of the memory.
CATEGORICAL = ("host", "point_id", "prompt_id", "verdict")

Filters = list[tuple[str, str, Any]]
#: The verdicts' names.
VERDICTS: tuple[str, ...] = get_args(Verdict)


#: What every line of a record file holds, as strings: its point, and a point line its status.
#: A line without them is damaged (kept verbatim), never a row every reader then trips on.
RECORD_KEYS: dict[str, tuple[str, ...]] = {POINTS_LOG: ("point_id", "status")}
#: The model a record file's lines are written from. A line holding a field it refuses (a
#: wrong type, a status that is no status) is damaged like a cut one, checked strictly as the
#: JSON it is: the writer dumps each model as it is, so `"4"` where a number belongs is damage,
#: not a number. A field a line lacks (a run written before the field existed) or one the model
#: does not declare (an extra grid flag) is read as it is, except in a settled line: it may
#: carry only the verdict columns its model declares (`STRICT`), never a measurement.
RECORD_MODELS: dict[str, type[BaseModel]] = {
    POINTS_LOG: PointRecord,
    REQUESTS_LOG: RequestRecord,
    SAMPLES_LOG: SampleRecord,
    SCORES_LOG: ScoreRecord,
    SETTLED_LOG: SettledRecord,
}
#: Validation errors that say a field is absent or undeclared, not that a value is wrong.
_NOT_DAMAGE = frozenset({"missing", "extra_forbidden"})
#: Record files whose lines may hold no field their model does not declare.
STRICT = frozenset({SETTLED_LOG})


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of an append-only JSONL file; a damaged line (a torn or hand-edited one)
    is skipped."""
    return jsonl_lines(path)[0]


def jsonl_lines(path: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str, str]]]:
    """A record file's records (JSON objects holding its `RECORD_KEYS`, every field of which
    its `RECORD_MODELS` accept), and its damaged lines as (line number, text verbatim: bytes
    that are not UTF-8 kept as surrogate escapes, why it is damaged). Split on "\\n" only: a
    JSON string may hold U+2028 and other separators that `str.splitlines` would cut at.
    Absent: nothing; there but unreadable (a directory, a FIFO, no permission, over the cap):
    the OSError, never read as absent."""
    lines = _lines(path)
    rows = [row for _, _, row, why in lines if not why]
    return rows, [(number, text, why) for number, text, _, why in lines if why]


def settled_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """settled.jsonl's lines in order, as `settled_points` applies them, and its damaged lines
    in words (`settled.jsonl line 3: field ...`). A damaged line that still names its point
    and attempt settled something that cannot be told: it leaves that point with no verdict
    (`determinism` None, or the value it holds where that is no verdict, so that readers name
    it: damaged, never proven) until a later sound line settles it."""
    rows: list[dict[str, Any]] = []
    damaged: list[str] = []
    for number, _text, row, why in _lines(path):
        if why:
            damaged.append(f"{path.name} line {number}: {why}")
            if not (isinstance(row, dict) and isinstance(row.get("point_id"), str)):
                continue
            held = row.get("determinism")
            row = {
                "point_id": row["point_id"],
                "attempt": row.get("attempt"),
                "determinism": None if held in VERDICTS else held,
            }
        rows.append(row)
    return rows, damaged


def _lines(path: Path) -> list[tuple[int, str, Any, str]]:
    """A record file's non-blank lines: (line number, text verbatim, what it parsed to (None
    where it is not JSON), why it is no record: "" for a record)."""
    try:
        data = read_state(path, RECORDS)
    except FileNotFoundError:
        return []
    lines: list[tuple[int, str, Any, str]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        text = raw.decode("utf-8", errors="surrogateescape")
        try:
            row = json.loads(text)
        except ValueError:
            lines.append((number, text, None, "not JSON"))
            continue
        lines.append((number, text, row, _damage(path.name, raw, row)))
    return lines


def _damage(name: str, raw: bytes, row: Any) -> str:
    """Why a parsed line is no record of the file `name` ("" when it is one)."""
    if not isinstance(row, dict):
        return "not a JSON object"
    for key in RECORD_KEYS.get(name, ("point_id",)):
        if not isinstance(row.get(key), str):
            return f"no {key} (a string)"
    model = RECORD_MODELS.get(name)
    try:
        if model is not None:
            model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        excused = frozenset({"missing"}) if name in STRICT else _NOT_DAMAGE
        refused = [e for e in exc.errors() if e["type"] not in excused]
        return _refused(refused) if refused else ""
    return ""


def _refused(errors: list[Any]) -> str:
    """The first field a model refused, its value and why; the others by name."""
    first, *more = errors
    field = ".".join(str(part) for part in first["loc"]) or "the line"
    if first["type"] == "json_invalid":
        return f"not JSON as written ({first['msg']})"
    said = f"field {field}: {first['msg']}, got {reprlib.repr(first['input'])}"
    if more:
        said += "; also " + ", ".join(".".join(map(str, e["loc"])) for e in more)
    return said


def read_manifest(run_dir: Path) -> Manifest | None:
    """The run's manifest, or None when absent or unreadable (a FIFO, a device: never opened
    for reading)."""
    try:
        return Manifest.model_validate_json(read_state(Path(run_dir) / MANIFEST, MANIFEST_KIND))
    except (OSError, ValueError):
        return None


class Run:
    """One run directory, read once: the manifest at once, the rest when first asked for.

    Each file is opened at most once: points.parquet is read whole (one row per point), and
    requests.parquet stays open, its footer parsed once; a column read whole is kept, and the
    big columns (texts, lists) are streamed for the rows asked, never kept.
    """

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir)
        self.manifest = read_manifest(self.dir)
        #: Views rebuilt from the records before this reading (`results.repair.repaired`).
        self.rebuilt: list[str] = []
        self._columns: dict[str, pa.ChunkedArray] = {}

    @property
    def engine(self) -> str:
        """The engine the run drove (`DEFAULT_ENGINE` when its manifest is unreadable)."""
        return self.manifest.engine if self.manifest else DEFAULT_ENGINE

    # -- points ------------------------------------------------------------------------------

    @cached_property
    def point_lines(self) -> list[dict[str, Any]]:
        """The append-only points.jsonl (a torn line skipped)."""
        return read_jsonl(self.dir / POINTS_LOG)

    @cached_property
    def _points_bytes(self) -> bytes | None:
        try:
            return read_state(self.dir / POINTS_PARQUET, RECORDS)
        except OSError:
            return None

    @cached_property
    def points(self) -> pd.DataFrame | None:
        """points.parquet, else points.csv, else the append-only points.jsonl, else None; rows
        of runs written before the `mode` column come back in today's columns. One frame for
        every reader of the run: copy it before changing it."""
        data = self._points_bytes
        points = None if data is None else _view(lambda: pd.read_parquet(io.BytesIO(data)))
        if points is None and (self.dir / POINTS_CSV).exists():
            path = self.dir / POINTS_CSV
            points = _view(lambda: _read_csv(path))
        if points is None:
            if not self.point_lines:
                return None
            points = pd.DataFrame(self.point_lines).drop_duplicates("point_id")
        return self.upgrade_legacy(self._settled(points))

    @cached_property
    def _settled_lines(self) -> tuple[list[dict[str, Any]], list[str]]:
        return settled_rows(self.dir / SETTLED_LOG)

    @property
    def settled(self) -> list[dict[str, Any]]:
        """settled.jsonl: verdict columns settled after their point lines ([] for most runs);
        a damaged line leaves its point with no verdict (`settled_rows`)."""
        return self._settled_lines[0]

    @property
    def settled_damage(self) -> list[str]:
        """settled.jsonl's damaged lines, each in words (`settled.jsonl line 3: field ...`):
        their columns never applied, and said by every command that reads the run."""
        return self._settled_lines[1]

    def _settled(self, points: pd.DataFrame) -> pd.DataFrame:
        """The frame with each point's latest settled columns (views written since hold them
        already; a view written before a settlement, or none, gets them here)."""
        if not self.settled or "point_id" not in points.columns:
            return points
        rows = {str(r["point_id"]): r for r in points.to_dict("records")}
        return pd.DataFrame(list(settled_points(rows, self.settled).values()))

    def upgrade_legacy(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Rows written before `mode` existed (`engine` was ar|ddtree): today's engine, mode."""
        if "mode" in frame.columns or "engine" not in frame.columns:
            return frame
        frame = frame.copy()
        frame["mode"] = frame["engine"].map(legacy_mode)
        frame["engine"] = self.engine
        return frame

    @cached_property
    def samples(self) -> list[dict[str, Any]]:
        """samples.jsonl's rows of completed points, from the attempt that completed (the
        seeded samples of distribution tests; [] for a run that drew none)."""
        keep = {(row.get("point_id"), row.get("attempt")) for row in self.point_lines}
        return [
            row
            for row in read_jsonl(self.dir / SAMPLES_LOG)
            if (row.get("point_id"), row.get("attempt")) in keep
        ]

    @cached_property
    def scores(self) -> list[dict[str, Any]]:
        """scores.jsonl's rows of completed points' attempts, each output and scorer once (the
        scored check's records; [] for a run that scored nothing)."""
        points = {str(row.get("point_id")): row for row in self.point_lines}
        return current_scores(read_jsonl(self.dir / SCORES_LOG), points)

    # -- requests ----------------------------------------------------------------------------

    @cached_property
    def _requests_file(self) -> pq.ParquetFile | None:
        path = self.dir / REQUESTS_PARQUET
        if not path.exists():
            return None
        return open_requests(path)

    @property
    def has_requests(self) -> bool:
        """True when requests.parquet exists (readable or not)."""
        return (self.dir / REQUESTS_PARQUET).exists()

    @cached_property
    def request_names(self) -> list[str]:
        """Column names of requests.parquet, from its footer ([] when absent)."""
        found = self._requests_file
        return list(found.schema_arrow.names) if found is not None else []

    def requests(
        self, columns: list[str], *, filters: Filters | None = None, categorical: bool = True
    ) -> pd.DataFrame:
        """Those of `columns` that the run's requests have (never the big columns unasked), of
        the rows matching pyarrow `filters` (all rows when None). With `categorical`, repeated
        strings come back as categoricals: a fraction of the memory and fast groupbys."""
        if self._requests_file is None:
            return pd.DataFrame(columns=columns)
        names = self.request_names
        present = [c for c in dict.fromkeys(columns) if c in names]
        legacy = "mode" in columns and "mode" not in present and "engine" in names
        if legacy and "engine" not in present:  # asked twice, it would be two columns
            present.append("engine")
        table = self._filtered(present, filters) if filters else self._whole(present)
        decode = [] if categorical else [c for c in CATEGORICAL if c in present]
        for name in decode:
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, _decoded(table.column(name)))
        frame = table.to_pandas()
        return self.upgrade_legacy(frame) if legacy else frame

    def _whole(self, columns: list[str]) -> pa.Table:
        """Whole columns, each read from the file once and kept."""
        assert self._requests_file is not None
        missing = [c for c in columns if c not in self._columns]
        if missing:
            read = self._requests_file.read(columns=missing)
            self._columns.update(zip(read.column_names, read.columns, strict=True))
        return pa.table({c: self._columns[c] for c in columns})

    def _filtered(self, columns: list[str], filters: Filters) -> pa.Table:
        """The rows matching `filters`, streamed in batches: only those rows are ever held."""
        assert self._requests_file is not None
        expression = pq.filters_to_expression(filters)
        keys = [c for c, _op, _v in filters if c not in columns]
        pieces = [
            pa.Table.from_batches([batch]).filter(expression).drop_columns(keys)
            for batch in self._requests_file.iter_batches(columns=[*columns, *keys])
        ]
        return pa.concat_tables(pieces) if pieces else self._requests_file.read(columns=columns)

    def sample_list(self, column: str, per_point: int = 200, seed: int = 0) -> pd.DataFrame:
        """The values of a list column (e.g. `itls`) of up to `per_point` requests per point,
        picked at random: columns `point_id` and `value`.

        Sampling rows (not values) keeps memory and time flat however many requests a run has.
        """
        empty = pd.DataFrame({"point_id": pd.Series([], dtype=str), "value": []})
        if self._requests_file is None or not {column, "point_id"} <= set(self.request_names):
            return empty
        ids = _decoded(self._whole(["point_id"]).column("point_id"))
        codes, uniques = pd.factorize(ids.to_numpy(zero_copy_only=False))
        order = np.random.default_rng(seed).permutation(len(codes))
        rank = pd.Series(codes[order]).groupby(codes[order]).cumcount().to_numpy()
        rows = np.sort(order[rank < per_point])
        picked = []
        start = 0
        # Streamed in batches: only the sampled rows' lists are ever held, not all of them.
        for batch in self._requests_file.iter_batches(batch_size=131072, columns=[column]):
            lo, hi = np.searchsorted(rows, [start, start + batch.num_rows])
            if hi > lo:
                picked.append(batch.column(0).take(rows[lo:hi] - start))
            start += batch.num_rows
        if not picked:
            return empty
        lists = pa.concat_arrays(picked)
        lengths = lists.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
        values = lists.flatten().to_numpy(zero_copy_only=False)
        return pd.DataFrame({"point_id": np.repeat(uniques[codes[rows]], lengths), "value": values})

    # -- the views' health -------------------------------------------------------------------

    def broken_views(self) -> list[str]:
        """The derived views that are missing, unreadable or behind the records (a run that
        died before rewriting them); none for a run without records."""
        if not (self.dir / POINTS_LOG).exists():  # there but no file: read, and said
            return []
        broken = []
        data = self._points_bytes
        try:
            rows = None if data is None else pq.read_metadata(pa.BufferReader(data)).num_rows
        except (OSError, ValueError):
            rows = None
        if rows is None:
            broken.append(POINTS_PARQUET)
        if not _csv_readable(self.dir / POINTS_CSV):
            broken.append(POINTS_CSV)
        if self._requests_file is None:
            broken.append(REQUESTS_PARQUET)
        recorded = len({row.get("point_id") for row in self.point_lines})
        if rows is not None and rows < recorded:
            broken.append(f"{POINTS_PARQUET} (behind the records)")
        elif rows is not None and rows > recorded:
            broken.append(f"{POINTS_LOG} (lost points that {POINTS_PARQUET} holds)")
        return broken

    def close(self) -> None:
        """Close requests.parquet (also closed when the object is collected)."""
        found = self.__dict__.pop("_requests_file", None)
        if found is not None:
            found.close()


def open_requests(source: Path | pa.BufferReader) -> pq.ParquetFile | None:
    """A requests view opened with its repeated strings as categoricals, or None when it is
    unreadable (a file that is no regular one is never opened). A run none of whose points
    completed a request has a view with no columns: it opens as it is (pyarrow raises KeyError
    for an absent dictionary column)."""
    try:
        if isinstance(source, Path):
            check(source, RECORDS)
        try:
            return pq.ParquetFile(source, read_dictionary=list(CATEGORICAL))
        except KeyError:
            if isinstance(source, pa.BufferReader):
                source.seek(0)
            return pq.ParquetFile(source)
    except (OSError, ValueError):  # ArrowInvalid is a ValueError
        return None


def read_run(run_dir: Path) -> Run:
    """The run directory as one `Run` (nothing but the manifest read yet)."""
    return Run(run_dir)


def _view(read: Any) -> pd.DataFrame | None:
    """A derived view, or None when it is unreadable (truncated, empty): the records it was
    written from are the truth, read instead (`repair.py` rewrites it)."""
    try:
        frame = read()
    except (OSError, ValueError, pd.errors.EmptyDataError):  # ArrowInvalid is a ValueError
        return None
    return frame if isinstance(frame, pd.DataFrame) else None


def _read_csv(path: Path) -> pd.DataFrame:
    check(path, RECORDS)  # a FIFO there would block pandas' open
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def _csv_readable(path: Path) -> bool:
    try:
        check(path, RECORDS)
        pd.read_csv(path, nrows=1)
    except pd.errors.EmptyDataError:
        return path.stat().st_size == 0 and not (path.parent / POINTS_LOG).stat().st_size
    except (OSError, ValueError):
        return False
    return True


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary-encoded column as its plain values (what a read without it gives)."""
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


# --- finding runs ---------------------------------------------------------------------------------


def sweep_lock(results_root: Path, sweep: str) -> Path:
    """The lock a run holds while it writes into its sweep's directory (beside it)."""
    return Path(results_root) / f".{sweep}.run.lock"


def run_state(run_dir: Path, status: str) -> str:
    """A manifest's status as it is now: a run whose manifest says `running` but whose sweep
    lock no live process holds was killed (resumable), whatever the manifest says."""
    run_dir = Path(run_dir)
    if (
        status == "running"
        and live_holder(sweep_lock(run_dir.parent.parent, run_dir.parent.name)) is None
    ):
        return "killed"
    return status


def is_run_dir(path: Path) -> bool:
    """True for a directory holding a manifest (a run directory, finished or not)."""
    return (Path(path) / MANIFEST).is_file()


def runs_of_sweep(sweep_dir: Path) -> list[Path]:
    """The run directories of one sweep (`results/<sweep>/`), oldest first."""
    if not Path(sweep_dir).is_dir():
        return []
    return sorted(p for p in Path(sweep_dir).iterdir() if is_run_dir(p))


def latest_run(results: Path, sweep: str | None = None) -> Path | None:
    """The newest run under a results root: of one sweep, or across sweeps when `sweep` is None."""
    if sweep is not None:
        runs = runs_of_sweep(Path(results) / sweep)
    else:
        runs = [p.parent for p in Path(results).glob(f"*/*/{MANIFEST}")]
    return max(runs, key=lambda p: p.name) if runs else None


def all_runs(results: Path) -> list[Run]:
    """Every run under a results root (its manifest read, nothing else), by directory."""
    return [Run(p.parent) for p in sorted(Path(results).glob(f"*/*/{MANIFEST}"))]


def is_finished(run_dir: Path) -> bool:
    """True when the run's manifest says it completed."""
    manifest = read_manifest(run_dir)
    return manifest is not None and manifest.status == "complete"


def previous_finished(run_dir: Path) -> Path | None:
    """The newest finished run of the same sweep that started before `run_dir`."""
    earlier = [p for p in runs_of_sweep(run_dir.parent) if p.name < run_dir.name]
    finished = [p for p in earlier if is_finished(p)]
    return finished[-1] if finished else None


def prune(sweep_dir: Path, keep: int, protect: Path | None = None) -> list[Path]:
    """Delete all but the newest `keep` runs of a sweep (never `protect`); return the deleted."""
    if keep < 1:
        raise ValueError("keep must be at least 1")
    runs = runs_of_sweep(sweep_dir)
    doomed = [p for p in runs[: max(0, len(runs) - keep)] if protect is None or p != protect]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
