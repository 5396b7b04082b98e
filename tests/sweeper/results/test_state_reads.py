"""State read safely (issue 46 #8): a settled line is validated against the point columns it
may carry (a wrong type, a measurement it may not set, an unknown verdict: a damaged line,
named, never a crash nor believed; its point is left with no verdict), and a state file that
is a FIFO or a link to a device is refused in one line before it is opened for reading (never
a hang, never memory without end). Each command runs in-process under a deadline and a memory
cap (`tests.bounded`), so old code shows its hang or its MemoryError as a failure, not as a
stuck or swapping machine."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.reader import POINTS_LOG, SCORES_LOG, SETTLED_LOG, Run, jsonl_lines
from tests.bounded import bounded
from tests.sweeper.results_factory import RunShape, make_run

SMALL = RunShape(budgets=(8,), topks=(4,), cuda_graphs=(False,), temperatures=(0.0, 0.7))


def _run(root: Path) -> tuple[Path, dict[str, Any]]:
    """A finished synthetic run whose points carry an attempt, and its speculative T>0 point."""
    run = make_run(root / "results", SMALL)
    points = pd.read_parquet(run / "points.parquet").assign(attempt="a1")
    points.to_parquet(run / "points.parquet", index=False)
    points.to_csv(run / "points.csv", index=False)
    spec = points[(points["mode"] == "speculative") & (points["temperature"] > 0)]
    return run, spec.iloc[0].to_dict()


def _settle(run: Path, point: dict[str, Any], **columns: Any) -> None:
    line = {"point_id": point["point_id"], "attempt": "a1", "settled_at": "t", **columns}
    with open(run / SETTLED_LOG, "a") as handle:
        handle.write(json.dumps(line) + "\n")


def _invoke(*argv: str, seconds: float = 30) -> tuple[int, str]:
    with bounded(seconds):
        done = CliRunner().invoke(app, list(argv), env={"COLUMNS": "200"})
    return done.exit_code, done.output


@pytest.mark.slow  # writes a report (seconds)
def test_a_settled_column_of_a_wrong_type_is_a_named_damaged_line(tmp_path: Path) -> None:
    run, point = _run(tmp_path)
    _settle(run, point, output_tok_s="fast", determinism=5)
    for argv in (["report", str(run)], ["best", str(run)]):
        code, output = _invoke(*argv)
        assert code != 70 and "internal error" not in output, output
        assert f"{SETTLED_LOG} line 1: field determinism: " in output, output
    rows, damaged = jsonl_lines(run / SETTLED_LOG)
    assert rows == [] and [n for n, _, _ in damaged] == [1]
    why = damaged[0][2]
    assert why.startswith("field determinism: Input should be 'exact'"), why
    assert why.endswith(", got 5; also output_tok_s"), why


def test_a_settled_line_never_sets_a_measurement(tmp_path: Path) -> None:
    run, point = _run(tmp_path)
    _settle(run, point, output_tok_s=99999.0, speedup=50.0)
    frame = Run(run).points
    assert frame is not None
    row = frame.set_index("point_id").loc[point["point_id"]]
    assert (row["output_tok_s"], row["speedup"]) == (point["output_tok_s"], point["speedup"])
    # What the damaged line settled cannot be told: the point has no verdict, never proven.
    assert pd.isna(row["determinism"])
    _, damaged = jsonl_lines(run / SETTLED_LOG)
    assert [why for _, _, why in damaged] == [
        "field output_tok_s: Extra inputs are not permitted, got 99999.0; also speedup"
    ]


@pytest.mark.parametrize("name", [SETTLED_LOG, POINTS_LOG])
def test_an_unknown_verdict_is_a_damaged_line(name: str, tmp_path: Path) -> None:
    run, point = _run(tmp_path)
    if name == SETTLED_LOG:
        _settle(run, point, determinism="bogus")
    else:
        line = {**{k: v for k, v in point.items() if pd.notna(v)}, "determinism": "bogus"}
        (run / name).write_text(json.dumps(line) + "\n")
    rows, damaged = jsonl_lines(run / name)
    assert rows == [] and len(damaged) == 1
    assert damaged[0][2].startswith("field determinism: Input should be 'exact', "), damaged


def test_a_state_file_linked_to_a_device_is_refused_before_it_is_read(tmp_path: Path) -> None:
    run, _ = _run(tmp_path)
    manifest = (run / "manifest.json").read_bytes()
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("/dev/zero")
    for argv, code in ((["ls", "--results", str(run.parent.parent)], 0), (["repair", str(run)], 5)):
        found, output = _invoke(*argv)
        assert found == code, output
        assert "internal error" not in output and "MemoryError" not in output, output
    (run / "manifest.json").unlink()
    (run / "manifest.json").write_bytes(manifest)
    (run / POINTS_LOG).symlink_to("/dev/zero")
    found, output = _invoke("best", str(run))
    assert found == 5, output
    assert output.strip().splitlines()[-1] == (
        f"error: not a regular file (a character device): {run / POINTS_LOG}"
    ), output


@pytest.mark.parametrize("where", ["manifest.json", POINTS_LOG])
def test_a_fifo_in_a_state_files_place_never_blocks(where: str, tmp_path: Path) -> None:
    run, _ = _run(tmp_path)
    (run / where).unlink(missing_ok=True)
    os.mkfifo(run / where)
    said = []
    results = str(run.parent.parent)
    for argv in (["ls", "--results", results], ["best", str(run)], ["repair", str(run)]):
        code, output = _invoke(*argv, seconds=10)
        said.append((argv[0], code))
        assert code in (0, 2, 5) and "internal error" not in output, output
    assert said[-1] == ("repair", 5), said


BAD_BIASES = ["{not json", "[1, 2]", '{"x": 1}', '{"5": NaN}', '{"5": 1e999}', '{"5": 250}']


@pytest.mark.parametrize("bias", BAD_BIASES)
@pytest.mark.parametrize("name", [POINTS_LOG, SCORES_LOG])
def test_a_logit_bias_column_that_is_no_bias_is_a_damaged_line(
    name: str, bias: str, tmp_path: Path
) -> None:
    """A hand-edited or torn `logit_bias` column (not JSON, not an object of token ids, a bias
    that is not finite or outside [-100, 100]) is a damaged line, named: never a crash in the
    judge that rebuilds it, never a NaN bias believed."""
    fields: dict[str, Any] = {"point_id": "p", "status": "ok", "logit_bias": "{}"}
    if name == SCORES_LOG:
        fields = {
            "run_id": "r", "host": "h", "point_id": "p", "attempt": "a1", "role": "test",
            "prompt_id": "q", "index": 0, "scorer": "self", "basis": "exact",
            "temperature": 0.7, "order": ["temperature"], "positions": [], "logit_bias": "{}",
        }  # fmt: skip
    good = json.dumps(fields)
    line = good.replace('"logit_bias": "{}"', f'"logit_bias": {json.dumps(bias)}')
    (tmp_path / name).write_text(good + "\n" + line + "\n")
    rows, damaged = jsonl_lines(tmp_path / name)
    assert len(rows) == 1 and [number for number, _, _ in damaged] == [2], damaged
    assert damaged[0][2].startswith("field logit_bias: "), damaged
