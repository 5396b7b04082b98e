"""Running `sweeper bisect` as a user does (the real CLI in a subprocess) on a history from
`histories.py`, and reading back what it left: `bisect.json` and the step run directories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from sweeper.bisect.state import BisectState


def bisect_spec(
    tmp: Path, port: int, package: Path, *, fake: bool, hosts: str = "", **extra: Any
) -> Path:
    """One speculative point (budget 8, topk 4) and its AR baseline, one prompt, 8 tokens."""
    spec: dict[str, Any] = {
        "name": "bis",
        "runtime": {
            "model": "fake" if fake else "tiny-random",
            "port": port,
            "ready_timeout_s": 30 if fake else 120,
            "package": str(package),
            **({} if fake else {"device": "cpu"}),
        },
        "grid": {"budget": [8], "topk": [4], "block_size": [4], "cuda_graph": [False]},
        "baseline": True,
        # tiny-random's top-2 margins are so small that the default margin calls any fault a
        # near tie; on this CPU verify equals AR bit for bit, so the margin is 0.
        "determinism": {"near_tie_margin": 0},
        "workload": {
            "api": "completions",
            "prompts": [{"id": "p0", "text": "prompt number 0:"}],
            "max_tokens": 8,
            "repeats": 1,
            "concurrency": [1],
            "warmup": 0,
            "seed": 7,
        },
    }
    spec.update(extra)
    path = tmp / "bis.yaml"
    path.write_text(hosts + yaml.safe_dump(spec, sort_keys=False))
    return path


def bisect_argv(spec: Path, good: str, bad: str, results: Path, *more: str) -> list[str]:
    head = [sys.executable, "-m", "sweeper.cli", "bisect", str(spec), "--good", good]
    return head + ["--bad", bad, "--results", str(results), *more]


def run_bisect(
    spec: Path, good: str, bad: str, results: Path, *more: str, timeout: float = 600
) -> tuple[int, Path, str]:
    """(exit code, the bisect directory: stdout's last line, stderr)."""
    done = subprocess.run(
        bisect_argv(spec, good, bad, results, *more),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    return done.returncode, Path(lines[-1]), done.stderr


def state_of(directory: Path) -> BisectState:
    return BisectState.load(directory)


def measured_runs(directory: Path) -> dict[str, list[Path]]:
    """Every step's run directories (finished or not), by the step directory's name."""
    found = {}
    for step in sorted((directory / "steps").iterdir()):
        root = step / "runs" / "bis"
        found[step.name] = sorted(p for p in root.iterdir() if (p / "manifest.json").exists())
    return found
