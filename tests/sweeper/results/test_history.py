"""The history database on both backends (an SQLite file, a real PostgreSQL server started by
the tests: tests/postgres_server.py): the same frame from each, a run written twice held once, a
failed write leaving the run as it was, an older schema brought up to date, a newer one refused.
Runs are the results factory's real run directories, read through the one loader."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweeper.analysis.history import history_rows, record_run
from sweeper.analysis.objective import Interval
from sweeper.results.history import (
    HISTORY_COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLE,
    HistoryError,
    _Db,
    history_frame,
    write_run,
)
from sweeper.results.reader import POINTS_CSV, POINTS_PARQUET, read_run
from tests.sweeper.results_factory import RunShape, make_run

SMALL: dict[str, Any] = {
    "budgets": (8,),
    "topks": (4,),
    "cuda_graphs": (False,),
    "n_prompts": 2,
    "repeats": 2,
}


def _runs(root: Path) -> list[Path]:
    """Two nights of one sweep: the second slower at b8-k4 greedy, with two datasets."""
    return [
        make_run(root, RunShape(run_id="20261201T020000Z-aaaa", **SMALL)),
        make_run(
            root,
            RunShape(
                run_id="20261202T020000Z-bbbb",
                slow={(8, 4, 0.0, False): 0.8},
                datasets=("mt-bench", "gsm8k"),
                seed=1,
                **SMALL,
            ),
        ),
    ]


def _expected(runs: list[Path]) -> pd.DataFrame:
    """What the history must hold: each run's rows as `history_rows` makes them, typed as an
    SQLite file gives them back (compared across backends: one answer for both)."""
    rows = [
        {**row, "sweep": "local", "run_id": run.name}
        for run in runs
        for row in history_rows(read_run(run))
    ]
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def test_both_backends_give_the_same_history(history_url: str, tmp_path: Path) -> None:
    runs = _runs(tmp_path / "results")
    for run in [*runs, runs[0]]:  # the first night written again: replaced, not doubled
        record_run(history_url, read_run(run))
    frame = history_frame(history_url)
    assert list(frame.columns) == list(HISTORY_COLUMNS)
    assert frame.groupby("run_id").size().to_dict() == {
        "20261201T020000Z-aaaa": 4,  # ar and b8-k4, at T 0 and 0.7
        "20261202T020000Z-bbbb": 8,  # the same, per dataset
    }
    expected = _expected(runs).sort_values(["run_time", "sweep", "run_id", "point_id"])
    for name in HISTORY_COLUMNS:
        got, want = list(frame[name]), list(expected[name])
        assert [_plain(v) for v in got] == [_plain(v) for v in want], name
    # The planted slowdown, and its noise interval around it (one restart: the requests').
    first = read_run(runs[0]).points
    assert first is not None
    row = frame[(frame["run_id"] == runs[0].name) & (frame["budget"] == 8)]
    row = row[row["temperature"] == 0.0].iloc[0]
    point = first[(first["budget"] == 8) & (first["temperature"] == 0.0)].iloc[0]
    assert row["output_tok_s"] == point["output_tok_s"]
    assert row["output_tok_s_low"] < row["output_tok_s"] < row["output_tok_s_high"]
    assert row["noise_source"] == "requests" and row["restarts"] == 1
    assert row["host_busy"] is None and row["determinism"] == "exact"
    assert row["engine_build"] == "0.1.0"
    per_dataset = frame[frame["run_id"] == runs[1].name]
    assert set(per_dataset["dataset"]) == {"mt-bench", "gsm8k"}
    assert per_dataset["server_config_id"].notna().all()  # taken from the whole point


def _plain(value: object) -> object:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def test_restarts_are_one_row_with_their_interval(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(**SMALL))
    points = pd.read_parquet(run / POINTS_PARQUET)
    again = points.assign(
        restart=1,
        point_id=points["point_id"] + "-r1",
        output_tok_s=points["output_tok_s"] * 1.1,
    )
    both = pd.concat([points.assign(restart=0), again], ignore_index=True)
    both.to_parquet(run / POINTS_PARQUET)
    (run / POINTS_CSV).unlink()
    rows = {r["point_id"]: r for r in history_rows(read_run(run))}
    assert len(rows) == len(points)
    for point in points.to_dict("records"):
        row = rows[point["point_id"]]
        values = [point["output_tok_s"], point["output_tok_s"] * 1.1]
        interval = Interval.of(values)
        assert row["restarts"] == 2 and row["noise_source"] == "restarts"
        assert row["output_tok_s"] == pytest.approx(interval.mean, rel=1e-12)
        assert (row["output_tok_s_low"], row["output_tok_s_high"]) == (interval.low, interval.high)


def test_a_failed_write_leaves_the_run_as_it_was(history_url: str) -> None:
    write_run(history_url, "s", "r1", [{"point_id": "p", "output_tok_s": 10.0}])
    twice = [{"point_id": "q", "output_tok_s": 1.0}, {"point_id": "q", "output_tok_s": 2.0}]
    with pytest.raises(HistoryError):  # the second row breaks the key: all or nothing
        write_run(history_url, "s", "r1", twice)
    frame = history_frame(history_url)
    assert list(frame["point_id"]) == ["p"] and list(frame["output_tok_s"]) == [10.0]


def test_an_older_schema_is_brought_up_to_date(history_url: str) -> None:
    """A database of schema version 1 (no series index) whose table lacks most of today's
    columns, as an older sweeper left it: read, its old row kept, then written to."""
    old = _Db(history_url)
    old.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    old.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("schema_version", "1"))
    for sql in MIGRATIONS[0]:
        old.execute(sql)
    old.execute(f'ALTER TABLE "{TABLE}" ADD COLUMN "output_tok_s" DOUBLE PRECISION')
    old.execute(
        f'INSERT INTO "{TABLE}" ("sweep", "run_id", "point_id", "output_tok_s") '
        "VALUES (?, ?, ?, ?)",
        ("s", "r0", "p", 7.5),
    )
    old.close()
    frame = history_frame(history_url)
    assert list(frame.columns) == list(HISTORY_COLUMNS)
    assert frame.iloc[0]["output_tok_s"] == 7.5 and math.isnan(frame.iloc[0]["tau"])
    write_run(history_url, "s", "r1", [{"point_id": "p", "tau": 2.5}])
    assert list(history_frame(history_url)["run_id"]) == ["r0", "r1"]
    db = _Db(history_url)
    (version,) = db.query("SELECT value FROM meta WHERE key = ?", ("schema_version",))[1]
    db.close()
    assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION == 2


def test_a_newer_database_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    write_run(str(path), "s", "r1", [])
    db = _Db(str(path))
    db.execute(
        "UPDATE meta SET value = ? WHERE key = ?", (str(SCHEMA_VERSION + 1), "schema_version")
    )
    db.close()
    with pytest.raises(HistoryError) as refused:
        history_frame(path)
    said = str(refused.value)
    assert said.startswith(f"{path}: history schema version {SCHEMA_VERSION + 1} is newer")
    assert "\n" not in said
