"""`sweeper history import` and `show` through the real CLI (typer's runner) on real run
directories: an import twice is the same history, a damaged run is named and skipped (its rows
never half written, an earlier copy of it kept), an unfinished run waits; `show` prints each
config's series and `--json` one object per run and point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.history import HISTORY_COLUMNS, history_frame
from sweeper.results.reader import MANIFEST, POINTS_CSV, POINTS_PARQUET
from tests.sweeper.results_factory import RunShape, make_run

SMALL: dict[str, Any] = {"budgets": (8,), "topks": (4,), "cuda_graphs": (False,), "n_prompts": 2}


def _night(root: Path, day: int, **shape: Any) -> Path:
    return make_run(
        root, RunShape(run_id=f"202612{day:02d}T020000Z-aaaa", seed=day, **SMALL, **shape)
    )


def _import(results: Path, url: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(app, ["history", "import", str(results), "--history", url])
    return done.exit_code, done.stdout, done.stderr


def test_import_twice_is_one_history_and_a_damaged_run_is_named(tmp_path: Path) -> None:
    results = tmp_path / "results"
    url = str(tmp_path / "history.sqlite3")
    good, torn = _night(results, 1), _night(results, 2)
    waiting = _night(results, 3, status="running")
    code, out, err = _import(results, url)
    assert code == 0, out + err
    first = history_frame(url)
    assert first.groupby("run_id").size().to_dict() == {good.name: 4, torn.name: 4}
    assert f"skipped local/{waiting.name}: the run is running, not complete" in out

    # Night 2's points are lost (views cut, no records), and night 4's manifest is cut.
    (torn / POINTS_PARQUET).write_bytes(b"PAR1 torn")
    (torn / POINTS_CSV).unlink()
    broken = _night(results, 4)
    (broken / MANIFEST).write_text('{"sweep": "loc')
    code, out, err = _import(results, url)
    assert code == 5, out + err
    assert f"damaged local/{torn.name}: none of its 4 points can be read (skipped)" in err
    assert f"damaged local/{broken.name}: {MANIFEST} is unreadable (skipped)" in err
    assert "1 run(s) in" in out and "2 damaged" in out
    again = history_frame(url)  # the same rows: night 2's earlier copy kept, not half replaced
    assert again.equals(first)


def test_show_prints_each_series_and_json_each_run_and_point(tmp_path: Path) -> None:
    results = tmp_path / "results"
    nights = [_night(results, day) for day in (1, 2, 3)]
    assert _import(results, str(results / "history.sqlite3"))[0] == 0
    runner = CliRunner()
    shown = runner.invoke(
        app,
        ["history", "show", "--results", str(results), "--config", "b8 k4 bs8", "--metric", "tau"],
    )
    assert shown.exit_code == 0, shown.output
    # Factory runs record no server label: the config is named as its columns spell it.
    assert shown.output.count("local b8 k4 bs8") == 2  # T 0 and T 0.7: two series
    for night in nights:
        assert shown.output.count(night.name) == 2
    lines = runner.invoke(app, ["history", "show", "--results", str(results), "--json"])
    rows = [json.loads(line) for line in lines.stdout.splitlines()]
    assert len(rows) == 3 * 4
    assert set(rows[0]) == {*HISTORY_COLUMNS, "label"}
    assert [r["run_id"] for r in rows[::4]] == [n.name for n in nights]
    bad = runner.invoke(app, ["history", "show", "--results", str(results), "--metric", "nope"])
    assert bad.exit_code == 2 and "--metric 'nope': one of output_tok_s" in bad.stderr
    elsewhere = tmp_path / "none"
    none = runner.invoke(app, ["history", "show", "--results", str(elsewhere)])
    assert none.exit_code == 5 and none.stderr.startswith(f"error: {elsewhere}/history.sqlite3: ")
    assert not elsewhere.exists()  # a reader creates nothing
