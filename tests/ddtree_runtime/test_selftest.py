"""The selftest CLI: exact runs exit 0; bad input is one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_runtime import selftest
from ddtree_runtime.algo import mask


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


TINY = [
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


def test_tiny_random_selftest_is_exact_and_reports_json(capsys: pytest.CaptureFixture) -> None:
    assert selftest.main(TINY) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exact"] is True and len(report["configs"]) == 6
    assert all(c["exact"] and c["first_divergence"] is None for c in report["configs"])
    assert max(c["tau"] for c in report["configs"]) > 1.0


@pytest.mark.parametrize("fault", ["pad_visible", "stale_positions"])
def test_a_planted_mask_fault_fails_the_selftest(fault: str, capsys: pytest.CaptureFixture) -> None:
    """The selftest is no rubber stamp: with a tree-mask fault planted (ddtree_runtime/algo/
    mask.py) it reports the divergence and exits 1."""
    mask._FAULTS.add(fault)
    try:
        code = selftest.main(TINY)
    finally:
        mask._FAULTS.discard(fault)
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["exact"] is False
    assert any(c["first_divergence"] is not None for c in report["configs"])


@pytest.mark.slow
def test_real_model_selftest_is_exact(tmp_path: Path) -> None:
    """The real model through the CLI: one batch of four prompts (every request its own tree
    size, so every verify round is padded), 16 tokens each. The same run of a runtime copy with
    `pad_visible` or `stale_positions` planted (tests/sweeper/planted.py) exits 1."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(selftest.PROMPTS[:4]) + "\n")
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
        "--prompts",
        str(prompts),
        "--max-new-tokens",
        "16",
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ALL EXACT" in proc.stdout
