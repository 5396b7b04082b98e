"""`sweeper validate`, `sweeper plan`, `sweeper schema` through the real CLI: output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app

ROOT = Path(__file__).resolve().parents[3]
LOCAL = str(ROOT / "sweeps" / "local.yaml")
BAD = str(ROOT / "tests" / "sweeper" / "spec" / "bad_specs" / "unknown_grid_key.yaml")
runner = CliRunner()


def test_validate_ok() -> None:
    result = runner.invoke(app, ["validate", LOCAL])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "ok: 10 server configs, 30 points"


def test_validate_bad_spec_exits_2_with_file_line_field() -> None:
    result = runner.invoke(app, ["validate", BAD])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"{BAD}:4: grid.budgets: unknown key 'budgets' (did you mean 'budget'?)" in result.stderr


def test_plan_table_lists_restarts_notes_and_estimate(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\ngrid: {budget: [2, 8], topk: [1, 4]}\nworkload:\n  prompts: [{id: a, text: hi}]\n"
    )
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())  # rich wraps long lines
    assert "ar-cg0" in out and "b8-k4-bs8-cg0" in out
    assert "note: dropped 1 point: topk 4 > budget 2" in out
    assert "4 restarts, 4 points, 4 measured requests" in out
    assert "estimate: about" in out


def test_plan_json() -> None:
    args = ["plan", LOCAL, "--json", "--load-s", "8", "--switch-s", "1", "--tok-s", "12"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["restarts"], data["n_points"], data["n_requests"]) == (10, 30, 240)
    assert (data["loads"], data["switches"]) == (1, 9)
    assert (data["hosts"][0]["loads"], data["hosts"][0]["switches"]) == (1, 9)
    steps = data["hosts"][0]["steps"]
    assert steps[0]["server_config"]["mode"] == "ar"
    # 1 x 8 s load + 9 x 1 s switch + (10 warmup + 20 points x 8 requests one by one + 10
    # points x 2 rounds of 4 at once) x 32 tokens / 12 tok/s: the rough model, batching taken
    # as free; and the sampled requests scored beside coupling, 8 at a time, 3 decode steps each.
    scoring = -(-data["n_scores"] // 8) * 3 / 12
    measuring = (10 + 160 + 20) * 32 / 12 + scoring
    # Then the winner measured only after a switch, loaded once more: 8 s + 1 warmup + its
    # three points again (2 x 8 requests one by one, 2 rounds of 4).
    confirming = 8 + (1 + 16 + 2) * 32 / 12
    assert data["hosts"][0]["confirmation"] == {"loads": 1, "points": 3}
    assert data["estimated_seconds"] == round(8 + 9 * 1 + measuring + confirming, 1)
    assert data["estimated_seconds_every_config_a_load"] == round(10 * 8 + measuring, 1)
    assert data["hosts"][0]["points"][0]["point_id"] == "local-ar-cg1-t0-c1"


def test_plan_bad_spec_exits_2() -> None:
    result = runner.invoke(app, ["plan", BAD, "--json"])
    assert result.exit_code == 2
    assert "grid.budgets" in result.stderr


def test_schema_is_json_schema_of_the_spec() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "Spec"
    assert {"name", "hosts", "runtime", "grid", "workload", "determinism"} <= set(
        schema["properties"]
    )


def test_shipped_gpu_specs_validate() -> None:
    """The realistic B300, RTX PRO 6000 and Slurm specs stay valid as the schema evolves."""
    expected = {
        # b7-k4 (b8-k4) is b7-k1 (b8-k1) under PR #29907's rules: measured once.
        # + one AR start per host to score the speculative configs' samples (scored, SGLang).
        "b300.yaml": "ok: 20 server configs, 108 points",
        "rtx6000.yaml": "ok: 13 server configs, 72 points",
        "slurm-example.yaml": "ok: 7 server configs, 24 points",
    }
    for name, summary in expected.items():
        result = runner.invoke(app, ["validate", str(ROOT / "sweeps" / name)])
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == summary


SECRET_SPEC = """name: secretive
runtime:
  secrets:
    HF_TOKEN: ${env:SWEEPER_TEST_UNSET_TOKEN}
workload:
  prompts: [{id: a, text: hi}]
"""


def test_unset_secret_warns_in_validate_and_stops_run_before_the_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SECRET_SPEC)
    monkeypatch.delenv("SWEEPER_TEST_UNSET_TOKEN", raising=False)
    checked = runner.invoke(app, ["validate", str(spec)])
    assert checked.exit_code == 0, checked.output
    assert "warning: secrets need these controller environment variables: " in checked.stderr
    assert "SWEEPER_TEST_UNSET_TOKEN" in checked.stderr
    results = tmp_path / "results"
    ran = runner.invoke(app, ["run", str(spec), "--results", str(results)])
    assert ran.exit_code == 2
    assert "SWEEPER_TEST_UNSET_TOKEN" in ran.stderr
    assert not results.exists()  # nothing was created, nothing started


def test_compare_refuses_directories_that_are_not_runs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    result = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'a'} is not a run directory (has no manifest.json)" in result.stderr
    assert result.stdout == ""
