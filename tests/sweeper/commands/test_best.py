"""`sweeper best` on a run whose AR baseline ran slow at one temperature: the speedups against it
read above their tau, so the closing line names them and a speedup objective withholds them, with
the numbers and the likely cause; throughput still ranks."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from sweeper.analysis.impossible import UNSEEN_CAUSE
from sweeper.commands import best
from tests.sweeper.results_factory import RunShape, make_run

app = typer.Typer()
app.command()(best.command)


def test_best_withholds_impossible_speedups_and_says_why(tmp_path: Path) -> None:
    run = str(make_run(tmp_path, RunShape(slow={(0, 0, 0.0, False): 0.3})))
    invoke = CliRunner().invoke
    only = invoke(app, [run, "--objective", "speedup", "--at", "t0-c1"])
    assert only.exit_code == best.EXIT_NONE_FEASIBLE, only.output
    lines = only.output.splitlines()
    assert lines[1].startswith("impossible speedups: 8 point(s) have a throughput speedup above")
    assert lines[2].startswith("t0-c1: no feasible config")
    withheld = [line for line in lines if "withheld: an impossible speedup (above tau): " in line]
    assert len(withheld) == 8 and all(UNSEEN_CAUSE in line for line in withheld)
    assert "b8 k4 bs8 cg: failed (withheld: an impossible speedup (above tau): speedup " in (
        only.output
    )
    # The other temperature's baseline held: a winner there, and its tok/s ranks at T=0.
    both = invoke(app, [run, "--objective", "speedup"])
    assert both.exit_code == 0 and "t0.7-c1: winner " in both.output
    tok_s = invoke(app, [run])
    assert tok_s.exit_code == 0 and "t0-c1: winner " in tok_s.output
    normal = invoke(app, [str(make_run(tmp_path / "n", RunShape())), "--objective", "speedup"])
    assert normal.exit_code == 0 and "withheld" not in normal.output
    assert "impossible speedups:" not in normal.output
