"""The history database: every finished run's point summaries, kept across runs and prunes.

One row per (run, point), where a point is one config measured at one load on one host (its
restarts collapsed into one row with their interval, and split per dataset where the run's
workload names datasets: `sweeper.analysis.history` makes the rows). Its columns
(`HISTORY_COLUMNS`) are derived from the record models, never listed twice: the run's columns
(`RUN_COLUMNS`), the point's identity (`PointKey`'s names and labels, `dataset`, the config
columns `CONFIG_COLUMNS`), its summary (`SUMMARY_COLUMNS`: numbers, verdicts, busy flags, as
`PointRecord` declares them) and the noise interval of each compared metric (`INTERVAL_COLUMNS`).

Where it lives is one setting, a URL (`SWEEPER_HISTORY_URL`, or `--history`): a path or
`sqlite:///path` is an SQLite file (the default: `history.sqlite3` beside the runs of a results
root), `postgresql://...` a PostgreSQL server (psycopg 3, the `history-pg` extra). The same SQL
serves both: identifiers quoted, types named as both read them, `?` parameters turned into
psycopg's `%s` in one place (`_Db`).

The schema is versioned (`meta.schema_version`, the length of `MIGRATIONS`): an older database
is brought up to date when opened, a newer one is refused in one line naming it. The summary
columns grow with the record models: each one the table lacks is added (NULL in older rows), so
a new record column needs no migration. A run is written in one transaction that first deletes
its rows: writing a run again replaces it (idempotent), and a failure leaves it as it was.
"""

from __future__ import annotations

import math
import os
import sqlite3
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.results.records import CONFIG_COLUMNS, PointKey, PointRecord

#: The environment variable naming the history database (a URL or a path).
HISTORY_ENV = "SWEEPER_HISTORY_URL"
#: The embedded database's file name, beside the sweeps of a results root.
HISTORY_FILE = "history.sqlite3"
TABLE = "points"

#: What a run contributes to each of its rows: its sweep, id and start, and the code measured:
#: the runtime's git commit (`Manifest.runtime_commit`), the engine's build (its version as the
#: server reported it, `HostFacts.runtime_version`) and source (`HostFacts.reported_source_hash`).
RUN_COLUMNS: dict[str, str] = {
    "sweep": "TEXT",
    "run_id": "TEXT",
    "run_time": "TEXT",
    "runtime_commit": "TEXT",
    "runtime_source_hash": "TEXT",
    "engine_build": "TEXT",
    "engine_commit": "TEXT",
}
#: Which point of its run a row is (the kept restart's point id; `<point id>/<dataset>` per
#: dataset), and what it measured: its host, labels, dataset and config columns.
IDENTITY: tuple[str, ...] = (
    "point_id",
    *(
        name
        for name in PointKey.model_fields
        if name not in ("run_id", "point_id", "attempt", "restart")
    ),
    "dataset",
    *CONFIG_COLUMNS,
)
#: A point's summary as its record holds it: throughput and speedups, tau, the latency
#: percentiles, its status and verdicts, and the host's and client's flags.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "status",
    "output_tok_s",
    "speedup",
    "speed_speedup",
    "tau",
    *(name for name in PointRecord.model_fields if name.startswith(("ttft_p", "itl_p"))),
    "determinism",
    "scored_verdict",
    "host_busy",
    "baseline_busy",
    "client_bound",
    "n_requests",
    "n_errors",
)
#: The metrics whose noise `compare` judges (`sweeper.analysis.compare.METRICS`, restated here
#: below analysis and held to it by a test): each gets its 95% interval's bounds.
INTERVAL_METRICS: tuple[str, ...] = ("output_tok_s", "tau", "ttft_p50")
#: Where a row's intervals come from: `restarts` (2+ restarts: their 95% interval) or
#: `requests` (one restart: twice the per-request standard error, compare's noise); and how
#: many restarts the row's numbers are the mean of.
NOISE_COLUMNS: dict[str, str] = {"noise_source": "TEXT", "restarts": "BIGINT"}
INTERVAL_COLUMNS: tuple[str, ...] = tuple(
    f"{metric}_{bound}" for metric in INTERVAL_METRICS for bound in ("low", "high")
)
#: Every column of the history, in order: what `history_frame` returns.
HISTORY_COLUMNS: tuple[str, ...] = (
    *RUN_COLUMNS,
    *IDENTITY,
    *SUMMARY_COLUMNS,
    *INTERVAL_COLUMNS,
    *NOISE_COLUMNS,
)
#: What tells one series from another: a config at one load on one host, per dataset (the
#: server label holds any extra grid flag; a run that recorded none: the config columns do).
SERIES_COLUMNS: tuple[str, ...] = ("host", "server_label", *CONFIG_COLUMNS, "dataset")

#: The schema's steps, oldest first; the database's `schema_version` is how many it has run.
#: A row's key is its run's point (sweep, run id, point id). Columns besides the key are not in
#: them: `_columns_added` adds each one a table lacks.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        f'CREATE TABLE "{TABLE}" ("sweep" TEXT NOT NULL, "run_id" TEXT NOT NULL, '
        '"point_id" TEXT NOT NULL, PRIMARY KEY ("sweep", "run_id", "point_id"))',
    ),
    # A series is read by its host and config: one config's history is one range scan.
    (f'CREATE INDEX "{TABLE}_series" ON "{TABLE}" ("host", "server_label", "run_time")',),
)
SCHEMA_VERSION = len(MIGRATIONS)
#: The columns each migration step needs before it runs (an index names its columns).
_NEEDS: dict[int, tuple[str, ...]] = {
    1: ("host", "server_label", "run_time"),
}


class HistoryError(Exception):
    """The history database cannot be used as asked (newer than this tool, unreachable, no
    driver); the message is one line naming it."""


def _sql_type(name: str) -> str:
    """A column's SQL type, as both SQLite and PostgreSQL read it, from its record model
    (`PointRecord`'s annotation) or the run's and noise columns' own."""
    declared = {**RUN_COLUMNS, **NOISE_COLUMNS}
    if name in declared:
        return declared[name]
    if name in INTERVAL_COLUMNS:
        return "DOUBLE PRECISION"
    field = PointRecord.model_fields.get(name)
    annotation = field.annotation if field is not None else str
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    kinds = set(typing.get_args(annotation)) - {type(None)} if union else {annotation}
    if kinds == {bool}:
        return "BOOLEAN"
    if kinds == {int}:
        return "BIGINT"
    if kinds <= {int, float}:
        return "DOUBLE PRECISION"
    return "TEXT"


COLUMN_TYPES: dict[str, str] = {name: _sql_type(name) for name in HISTORY_COLUMNS}


def default_url(results: Path) -> str:
    """The history a results root writes to: `SWEEPER_HISTORY_URL`, else its embedded file."""
    return os.environ.get(HISTORY_ENV) or str(Path(results) / HISTORY_FILE)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def shown(url: str) -> str:
    """The database as a message names it: a server's URL without its password."""
    if not is_postgres(url):
        return str(_sqlite_path(url))
    scheme, _, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    return f"{scheme}://{auth.partition(':')[0]}{at}{host}" if at else url


def _sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite://")) if url.startswith("sqlite://") else Path(url)


class _Db:
    """One connection, SQLite's or psycopg's, behind the few calls the history makes: SQL is
    written once with `?` parameters and run on either."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.postgres = is_postgres(url)
        self.conn: Any
        #: The driver's errors, each said as a `HistoryError` naming the database.
        self.errors: tuple[type[Exception], ...] = (sqlite3.Error,)
        if self.postgres:
            try:
                import psycopg
            except ImportError:
                need = "pip install 'ddtree-sweeper[history-pg]'"
                raise HistoryError(f"{shown(url)}: PostgreSQL needs psycopg ({need})") from None
            self.errors = (psycopg.Error,)
            try:
                self.conn = psycopg.connect(url, autocommit=True)
            except psycopg.Error as exc:
                raise HistoryError(f"{shown(url)}: {str(exc).splitlines()[0]}") from None
        else:
            path = _sqlite_path(url)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # isolation_level None: no implicit transactions, each opened by `transaction`.
                self.conn = sqlite3.connect(path, isolation_level=None, timeout=60)
            except (OSError, sqlite3.Error) as exc:
                raise HistoryError(f"{path}: {exc}") from None

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.cursor().executemany(self._sql(sql), [tuple(r) for r in rows])

    def query(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        cursor = self.conn.execute(self._sql(sql), tuple(params))
        names = [d[0] for d in cursor.description or ()]
        return names, [tuple(r) for r in cursor.fetchall()]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing; SQLite's takes the write lock at once (two writers queue)."""
        if self.postgres:
            with self.conn.transaction():
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def tables(self) -> set[str]:
        if self.postgres:
            sql = (
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            )
        else:
            sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
        return {str(r[0]) for r in self.query(sql)[1]}

    def columns(self) -> list[str]:
        return self.query(f'SELECT * FROM "{TABLE}" WHERE 1 = 0')[0]

    def close(self) -> None:
        self.conn.close()


@contextmanager
def _opened(url: str) -> Iterator[_Db]:
    """The database at `url`, its schema brought up to this tool's (refused when newer)."""
    db = _Db(url)
    try:
        with db.transaction():
            if db.postgres:  # two first writers must not both create the schema
                db.execute("SELECT pg_advisory_xact_lock(4049)")
            _migrate(db)
        yield db
    except db.errors as exc:
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HistoryError(f"{shown(url)}: {said}") from None
    finally:
        db.close()


def schema_version(db: _Db) -> int:
    """The database's schema version: 0 when it has none yet."""
    if "meta" not in db.tables():
        return 0
    rows = db.query("SELECT value FROM meta WHERE key = ?", ("schema_version",))[1]
    return int(rows[0][0]) if rows else 0


def _migrate(db: _Db) -> None:
    version = schema_version(db)
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"{shown(db.url)}: history schema version {version} is newer than this sweeper "
            f"reads ({SCHEMA_VERSION}); upgrade the sweeper"
        )
    if version == 0:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("schema_version", "0"))
    for step in range(version, SCHEMA_VERSION):
        if step in _NEEDS:
            _columns_added(db, _NEEDS[step])
        for sql in MIGRATIONS[step]:
            db.execute(sql)
    if version != SCHEMA_VERSION:
        db.execute(
            "UPDATE meta SET value = ? WHERE key = ?", (str(SCHEMA_VERSION), "schema_version")
        )
    _columns_added(db, HISTORY_COLUMNS)


def _columns_added(db: _Db, names: Sequence[str]) -> None:
    have = set(db.columns())
    for name in names:
        if name not in have:
            db.execute(f'ALTER TABLE "{TABLE}" ADD COLUMN "{name}" {COLUMN_TYPES[name]}')


def _value(name: str, value: Any) -> Any:
    """A row's value as the database stores it: None for missing, lists and dicts as text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    kind = COLUMN_TYPES[name]
    if kind == "BOOLEAN":
        return bool(value)
    if kind == "BIGINT":
        return int(value)
    if kind == "DOUBLE PRECISION":
        return float(value)
    return value if isinstance(value, str) else str(value)


def write_run(url: str, sweep: str, run_id: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """Replace run `run_id` of `sweep` in the history by `rows` (each a mapping holding some of
    `HISTORY_COLUMNS`), in one transaction; returns how many rows it holds."""
    names = list(HISTORY_COLUMNS)
    values = [
        [_value(n, {**row, "sweep": sweep, "run_id": run_id}.get(n)) for n in names] for row in rows
    ]
    quoted = ", ".join(f'"{n}"' for n in names)
    marks = ", ".join("?" for _ in names)
    with _opened(url) as db, db.transaction():
        db.execute(f'DELETE FROM "{TABLE}" WHERE "sweep" = ? AND "run_id" = ?', (sweep, run_id))
        if values:
            db.executemany(f'INSERT INTO "{TABLE}" ({quoted}) VALUES ({marks})', values)
    return len(values)


def history_frame(url_or_path: str | Path) -> pd.DataFrame:
    """The whole history: one row per run x point, its columns `HISTORY_COLUMNS` in order,
    sorted by run time, run and point. Booleans are True/False/None, numbers floats or ints
    (NaN where missing), the rest strings or None; an empty history has the columns and no
    rows. Raises `HistoryError` (one line) for a database that is not there, is newer than this
    tool, or cannot be reached."""
    url = str(url_or_path)
    if not is_postgres(url) and not _sqlite_path(url).exists():  # a reader creates nothing
        raise HistoryError(f"{shown(url)}: no history there (`sweeper history import` fills one)")
    order = '"run_time", "sweep", "run_id", "point_id"'
    with _opened(url) as db:
        quoted = ", ".join(f'"{n}"' for n in HISTORY_COLUMNS)
        names, rows = db.query(f'SELECT {quoted} FROM "{TABLE}" ORDER BY {order}')
    frame = pd.DataFrame(rows, columns=names)
    for name in HISTORY_COLUMNS:
        kind = COLUMN_TYPES[name]
        if kind == "BOOLEAN":
            frame[name] = [None if v is None else bool(v) for v in frame[name]]
            frame[name] = frame[name].astype(object)
        elif kind == "DOUBLE PRECISION":
            frame[name] = pd.to_numeric(frame[name], errors="coerce").astype(float)
        elif kind == "BIGINT":
            frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("Int64")
        else:
            frame[name] = frame[name].astype(object)
    return frame
