"""`sweeper ls`: every run under a results root with its status and point counts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.lock import run_lock
from sweeper.results.reader import sweep_lock
from sweeper.results.store import RunStore


def test_ls_lists_runs_with_counts(tmp_path: Path) -> None:
    fields = {"sweeper_version": "0", "spec": {}, "runtime_source_hash": "h"}
    a = RunStore.create(tmp_path, {"sweep": "alpha", **fields})
    a.manifest.status, a.manifest.points_ok, a.manifest.points_failed = "complete", 5, 1
    a.manifest.points_total = 6
    a.save_manifest()
    b = RunStore.create(tmp_path, {"sweep": "beta", **fields})
    b.manifest.status = "running"
    b.save_manifest()
    with run_lock(sweep_lock(tmp_path, "beta")):  # as `sweeper run` holds it while it runs
        out = CliRunner().invoke(app, ["ls", "--results", str(tmp_path)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    row_a = next(line for line in lines if a.run_id in line)
    assert "alpha" in row_a and "complete" in row_a and " 5 " in row_a and " 6 " in row_a
    assert any(b.run_id in line and "running" in line for line in lines)
    # The same manifest once nobody holds the lock (the run was SIGKILLed): killed, resumable.
    out = CliRunner().invoke(app, ["ls", "--results", str(tmp_path)])
    assert any(b.run_id in line and "killed" in line for line in out.output.splitlines())


def test_ls_without_runs(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["ls", "--results", str(tmp_path / "none")])
    assert out.exit_code == 0 and "no runs under" in out.output
