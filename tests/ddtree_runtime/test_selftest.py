"""The selftest CLI: exact runs exit 0; bad input is one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_runtime import selftest


def run_cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddtree_runtime", "selftest", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--budgets", "-1"], "--budgets: -1 is below the minimum 0"),
        (["--topk", "0"], "--topk: 0 is below the minimum 1"),
        (["--block-size", "1"], "--block-size: 1 is below the minimum 2"),
        (["--budgets", "a,b"], "expected comma-separated integers"),
        (["--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_weights_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    proc = run_cli("--model", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"selftest: error: no *.safetensors weights in {tmp_path}"


def test_tiny_random_selftest_is_exact_and_reports_json(capsys: pytest.CaptureFixture) -> None:
    argv = [
        "--model",
        "tiny-random",
        "--dtype",
        "float64",
        "--budgets",
        "0,3,8",
        "--topk",
        "1,4",
        "--block-size",
        "4",
        "--batch",
        "3",
        "--max-new-tokens",
        "12",
        "--json",
        "--draft",
        "oracle",
    ]
    assert selftest.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exact"] is True and len(report["configs"]) == 6
    assert all(c["exact"] and c["first_divergence"] is None for c in report["configs"])
    assert max(c["tau"] for c in report["configs"]) > 1.0


@pytest.mark.slow
def test_real_model_selftest_is_exact() -> None:
    proc = run_cli(
        "--model",
        "smollm2-135m",
        "--budgets",
        "16",
        "--topk",
        "1,4",
        "--block-size",
        "8",
        "--batch",
        "4",
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ALL EXACT" in proc.stdout
