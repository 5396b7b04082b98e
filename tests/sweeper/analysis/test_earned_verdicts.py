"""A verdict is earned, never defaulted: a speculative point whose recorded `determinism` is
missing or no verdict's name (a `settled.jsonl` line setting it to null or `bogus`, a
`points.jsonl` line without it) is a damaged record, named, and never proven: `best` names no
winner, the report's answer deploys nothing, `compare` calls it no longer proven."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from sweeper.analysis.compare import compare_loaded
from sweeper.analysis.ending import verdict_counts
from sweeper.bisect.judge import judge_verdict
from sweeper.commands import best
from sweeper.proof.verdicts import proven, standing
from sweeper.report.assemble import build_view
from sweeper.results.reader import read_run
from tests.sweeper.results_factory import RunShape, make_run

app = typer.Typer()
app.command()(best.command)
#: One AR point and one speculative config at one load: damage its verdict and nothing is left.
SHAPE = dict(temperatures=(0.0,), budgets=(8,), topks=(1,), cuda_graphs=(False,))
ATTEMPT = "a1"
#: The speculative point as a bisect chooses it (`bisect.judge.base_id`).
CHOSEN = "local-b8-k1-bs8-t0-c1"
#: How each damage is named beside its point.
DAMAGE = {
    "settled_null": "no determinism recorded",
    "settled_bogus": "determinism 'bogus' is no verdict",
    "points_missing": "no determinism recorded",
}


def _run(root: Path, run_id: str, damage: str = "") -> tuple[Path, str]:
    """A run as `sweeper run` leaves it (points.jsonl, the views written from its lines), with
    its speculative point's verdict damaged the `damage` way; its directory and that point."""
    run = make_run(root, RunShape(run_id=run_id, **SHAPE))  # type: ignore[arg-type]
    frame = pd.read_parquet(run / "points.parquet").assign(attempt=ATTEMPT)
    frame["server_label"] = ["ar" if m == "ar" else "b8-k1-bs8" for m in frame["mode"]]
    frame["request_config_id"] = "t0-c1"
    lines = [{k: _plain(v) for k, v in r.items()} for r in frame.to_dict("records")]
    point = next(str(r["point_id"]) for r in lines if r["mode"] != "ar")
    if damage == "points_missing":
        del next(r for r in lines if r["point_id"] == point)["determinism"]
    (run / "points.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    views = pd.DataFrame(lines)
    views.to_parquet(run / "points.parquet", index=False)
    views.to_csv(run / "points.csv", index=False)
    settled = {"settled_null": None, "settled_bogus": "bogus"}
    if damage in settled:
        line = {
            "point_id": point,
            "attempt": ATTEMPT,
            "settled_at": "2026-11-29T02:05:00Z",
            "determinism": settled[damage],
        }
        (run / "settled.jsonl").write_text(json.dumps(line) + "\n")
    return run, point


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and value != value else value


def test_a_sound_run_has_a_winner(tmp_path: Path) -> None:
    """The control: undamaged, the same run names its config (so the cases below are no
    accident of the shape)."""
    run, _ = _run(tmp_path, "20261129T020000Z-aaaa")
    done = CliRunner().invoke(app, [str(run)])
    assert done.exit_code == 0 and "t0-c1: winner b8 k1 bs8" in done.output, done.output
    (answer,) = build_view(read_run(run)).answers
    assert answer.config == "b8 k1 bs8"
    assert judge_verdict([run], [CHOSEN]).outcome == "good"


@pytest.mark.parametrize("damage", ["settled_null", "settled_bogus", "points_missing"])
def test_a_damaged_verdict_is_never_proven(tmp_path: Path, damage: str) -> None:
    base, _ = _run(tmp_path / "a", "20261128T020000Z-aaaa")
    run, point = _run(tmp_path / "b", "20261129T020000Z-bbbb", damage)
    done = CliRunner().invoke(app, [str(run)])
    assert done.exit_code == best.EXIT_NONE_FEASIBLE, done.output
    assert "winner" not in done.output
    said = next(line for line in done.output.splitlines() if "b8 k1 bs8" in line)
    assert said == f"  b8 k1 bs8: damaged ({point}: {DAMAGE[damage]})", said
    view = build_view(read_run(run))
    (answer,) = view.answers
    assert answer.config == "" and "damaged" in answer.note, answer
    assert [b.kind for b in view.blockers] == ["damaged verdicts"]
    assert view.blockers[0].line.endswith(f"b8 k1 bs8 T=0 c=1 ({point}: {DAMAGE[damage]})")
    # A bisect step on it cannot call the commit good: no verdict, no judgement.
    judged = judge_verdict([run], [CHOSEN])
    assert judged.outcome == "skip"
    assert judged.reason == f"not proven, so not judged: {point} {DAMAGE[damage]}"
    rows = compare_loaded(read_run(base), read_run(run), 0.05).rows
    (changed,) = [r for r in rows if r.flags]
    assert changed.is_regression and changed.label.startswith("b8 k1 bs8")
    assert changed.flags == [f"no longer proven (damaged: {DAMAGE[damage]})"]


def test_only_a_clean_verdict_is_proven() -> None:
    """The one definition: clean verdicts prove; every other value is a violation, unjudged
    or damaged (missing, not a string, no verdict's name)."""
    assert [proven(v) for v in ("exact", "near-tie", "distribution-ok")] == [True] * 3
    for value in ("unproven", "n/a", "diverged", "bogus", "", None, float("nan"), 1, ["exact"]):
        assert not proven(value), value
    assert [standing(v) for v in ("exact", "shifted", "n/a", "bogus", None)] == [
        "proven",
        "violation",
        "unjudged",
        "damaged",
        "damaged",
    ]
    rows = [{"status": "ok", "determinism": v} for v in ("exact", None, "bogus")]
    assert verdict_counts(rows) == [("exact", 1), ("damaged", 2)]  # a status line's counts
