"""The one reader: `sweeper report` (and compare) read a run once, each parquet file opened once,
whatever the report's sections ask of it; a broken view is rebuilt, then read once."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from sweeper.commands import compare, report
from sweeper.results.reader import Run, read_run
from tests.sweeper.results_factory import RunShape, make_run

app = typer.Typer()
app.command("report")(report.command)
app.command("compare")(compare.command)

#: The parquet counts of the test that is counting (None: no test is).
_counting: Counter[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Python-level opens (open(), Path.read_bytes, pandas' handles) of a parquet file.
    if _counting is not None and event == "open" and str(args[0]).endswith(".parquet"):
        _counting[Path(str(args[0])).name] += 1


sys.addaudithook(_audit)  # audit hooks cannot be removed: it counts only inside `opens()`


@contextmanager
def opens(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Count every opening of a parquet file by name: Python's opens (an audit hook) and
    pyarrow's, whichever entry point is used (only the outermost call of one opening counts:
    `read_schema` opens through `ParquetFile`, pandas through `read_table`)."""
    global _counting
    counts: Counter[str] = Counter()
    depth = [0]

    def counted(read: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(read)
        def wrapper(source: Any, *args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0 and str(source).endswith(".parquet"):
                counts[Path(str(source)).name] += 1
            depth[0] += 1
            try:
                return read(source, *args, **kwargs)
            finally:
                depth[0] -= 1

        return wrapper

    for name in ("read_table", "read_schema", "read_metadata", "read_pandas"):
        monkeypatch.setattr(pq, name, counted(getattr(pq, name)))
    init = pq.ParquetFile.__init__

    def parquet_file(self: pq.ParquetFile, source: Any, *args: Any, **kwargs: Any) -> None:
        counted(lambda s, *a, **k: init(self, s, *a, **k))(source, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "__init__", parquet_file)
    _counting = counts
    try:
        yield counts
    finally:
        _counting = None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("results")
    earlier = make_run(root, RunShape(run_id="20261128T020000Z-aaaa", seed=1))
    # Divergences, a failure and a broken config: every section of the report reads requests.
    later = make_run(
        root,
        RunShape(
            run_id="20261129T020000Z-bbbb",
            seed=2,
            diverge={(8, 4, 0.0, True): "diverged", (16, 4, 0.0, False): "garbled"},
            fail={(16, 1, 0.7, False): "server exited"},
        ),
    )
    return earlier, later


def test_report_opens_each_parquet_file_once(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, later = runs
    with opens(monkeypatch) as counts:
        done = CliRunner().invoke(app, ["report", str(later), "-o", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.output
    assert "Diagnosis" in (tmp_path / "r.html").read_text()
    assert counts == {"points.parquet": 1, "requests.parquet": 1}


def test_report_with_a_comparison_opens_each_runs_files_once(
    runs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier, later = runs
    argv = ["report", str(later), "--compare", str(earlier), "-o", str(tmp_path / "r.html")]
    seen: list[str] = []
    original = Run.__init__

    def noting(self: Run, run_dir: Path) -> None:
        seen.append(Path(run_dir).name)
        original(self, run_dir)

    monkeypatch.setattr(Run, "__init__", noting)
    with opens(monkeypatch) as counts:
        done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    assert sorted(seen) == sorted([earlier.name, later.name])  # each run read once
    assert counts == {"points.parquet": 2, "requests.parquet": 2}  # one of each per run


def test_compare_opens_each_parquet_file_once(
    runs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier, later = runs
    with opens(monkeypatch) as counts:
        done = CliRunner().invoke(app, ["compare", str(earlier), str(later)])
    assert done.exit_code == 1, done.output  # determinism newly broken: a regression
    assert counts == {"points.parquet": 2, "requests.parquet": 2}


def test_a_missing_view_is_rebuilt_in_memory_then_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweeper.results.store import RunStore

    run = make_run(tmp_path, RunShape())
    # Records to rebuild from: the factory writes views only, so make them from the views.
    points = read_run(run).points
    assert points is not None
    lines = [points.iloc[i].to_json() for i in range(len(points))]
    (run / "points.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(RunStore, "consolidate", lambda self: pytest.fail("a reader wrote"))
    (run / "points.csv").unlink()
    with opens(monkeypatch) as counts:
        done = CliRunner().invoke(app, ["report", str(run), "-o", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.output
    assert "points.csv rebuilt in memory from every copy of the records" in done.output
    assert not (run / "points.csv").exists()  # a read command writes nothing into the run
    # Each file read once to check, once to recover: never once per section.
    assert counts == {"points.parquet": 2, "requests.parquet": 2}


def test_requests_read_by_column_match_the_file(runs: tuple[Path, Path]) -> None:
    _, later = runs
    run = read_run(later)
    whole = pq.read_table(later / "requests.parquet").to_pandas()
    some = run.requests(["point_id", "verdict", "text"], categorical=False)
    assert some.equals(whole[["point_id", "verdict", "text"]])
    bad = run.requests(
        ["point_id", "verdict", "text"],
        filters=[("verdict", "not in", ["exact", "n/a"])],
        categorical=False,
    )
    expected = whole[~whole["verdict"].isin(["exact", "n/a"])][["point_id", "verdict", "text"]]
    assert bad.equals(expected.reset_index(drop=True))
    assert str(run.requests(["point_id"])["point_id"].dtype) == "category"
    assert run.requests(["nope"]).empty and run.sample_list("nope").empty
