"""A run's last lines say what its report says, through the real CLI with the fake runtime:
beside a CPU hog they name the busy points and the speedups withheld; with a planted slow AR
baseline (the fake's AR server 6x slower than its speculative ones, tau 2) they flag the
speedup above tau with its cause; each run ends with its exit code's meaning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

HOG = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"


def _run(spec: Path, results: Path) -> tuple[int, list[str], Path]:
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)]
    out = subprocess.run([*argv, "--plain"], capture_output=True, text=True, timeout=300)
    return out.returncode, out.stderr.strip().splitlines(), Path(out.stdout.split()[-1])


def _tail(lines: list[str]) -> list[str]:
    """The lines after the run's status line (`complete: N ok, ...`)."""
    start = max(i for i, line in enumerate(lines) if " ok, " in line and " failed of " in line)
    return lines[start + 1 :]


def test_a_run_beside_a_cpu_hog_names_its_busy_points(tmp_path: Path, port: int) -> None:
    env = fake_runtime_env(tmp_path, {"FAKE_TOKEN_DELAY": "0.02"})
    spec = write_spec(tmp_path, port, fake_env=env, name="hogged", topk=(4,), max_tokens=12)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(2)]
    try:
        code, lines, run_dir = _run(spec, tmp_path / "results")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    tail = _tail(lines)
    assert code == 0, "\n".join(lines[-20:])
    assert tail[0].startswith("busy host: 2 point(s) measured beside other load"), tail
    assert "1 speedup(s) withheld" in tail[0] and "other processes used" in tail[0]
    # the report's command, its run directory on a line of its own where the line is too long
    report = tail[tail.index(next(ln for ln in tail if ln.startswith("report"))) : -1]
    assert "sweeper report" in report[0] and str(run_dir) in report[-1] and len(report) <= 2
    assert tail[-1] == "exit 0: all well: every point ok, no violation, something proven"
    assert all(len(line) <= 160 for line in tail if line != f"  {run_dir}"), tail


def test_a_slowed_baseline_gives_a_flagged_speedup_above_tau(tmp_path: Path, port: int) -> None:
    slow_ar = {"FAKE_TOKEN_DELAY": "0.01", "FAKE_DELAYS": json.dumps({"speculative=none": 0.06})}
    env = fake_runtime_env(tmp_path, slow_ar)
    spec = write_spec(tmp_path, port, fake_env=env, name="slowar", topk=(4,), max_tokens=12)
    code, lines, run_dir = _run(spec, tmp_path / "results")
    tail = _tail(lines)
    assert code == 0, "\n".join(lines[-20:])
    flagged = [line for line in tail if line.startswith("impossible speedups: 1 point(s)")]
    assert len(flagged) == 1, tail
    assert "> tau 2.00" in flagged[0] and "withheld" in flagged[0]
    assert tail[-1].startswith("exit 0: ")
    # The same run's `best` withholds it, saying why.
    best = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "best", str(run_dir)], capture_output=True, text=True
    )
    assert "impossible" in best.stdout + best.stderr, best.stdout + best.stderr


def test_an_ar_only_run_says_nothing_was_compared(tmp_path: Path, port: int) -> None:
    """Issue 40 #5: `only:` the AR point ran clean and exited 0 "all well: ... something
    proven", though nothing was compared with it. Now: exit 6 and a line saying so."""
    spec = write_spec(
        tmp_path, port, fake_env=fake_runtime_env(tmp_path), topk=(4,), prompts=1, repeats=1,
        max_tokens=4, extra={"only": ["local-ar-cg0-t0-c1"]},
    )  # fmt: skip
    code, lines, _ = _run(spec, tmp_path / "results")
    tail = _tail(lines)
    assert code == 6, "\n".join(lines[-20:])
    assert lines[-1] == "exit 6: nothing proven: no point was compared and proven right", lines
    said = [ln for ln in tail if ln.startswith("nothing compared: 1 point(s), all AR references")]
    assert len(said) == 1, tail
