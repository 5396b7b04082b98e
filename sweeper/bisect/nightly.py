"""The nightly's bisect: a regression between two runs whose runtime sources are two different
clean git commits starts `sweeper bisect` between those commits, on the regressed points
(exactness when determinism broke, else speed with the nightly's threshold); its answer goes
into the nightly's summary line and report. A change point of the history
(`sweeper.analysis.changepoints`) is bisected the same way over its commit range, at half its
step (the midpoint between the two levels). Run as a subprocess, as the nightly's sweep is."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from sweeper.analysis.changepoints import ChangePoint
from sweeper.analysis.compare import Comparison
from sweeper.bisect.judge import base_id
from sweeper.bisect.state import BisectState
from sweeper.results.reader import read_manifest


def bisect_regression(
    spec: Path,
    results: Path,
    previous: Path,
    current: Path,
    comparison: Comparison,
    threshold: float,
    log: logging.Logger,
) -> str:
    """Bisect the regression; one line saying what was found, or why nothing was bisected."""
    before, after = read_manifest(previous), read_manifest(current)
    good = before.runtime_commit if before is not None else None
    bad = after.runtime_commit if after is not None else None
    regressed = comparison.regressions
    broken = any(f.startswith("determinism broken") for r in regressed for f in r.flags)
    points = []
    for row in regressed:
        try:
            points.append(base_id(row.b))
        except KeyError:
            points.append(row.point_id)
    return _walk(spec, results, good, bad, points, None if broken else threshold, log)


def bisect_change(spec: Path, results: Path, change: ChangePoint, log: logging.Logger) -> str:
    """Bisect a change point's commit range on its config: exactness for a verdict change,
    else speed at half the step; one line as `bisect_regression`'s."""
    host, label, request = change.identity
    point = base_id({"host": host, "server_label": label, "request_config_id": request})
    threshold = None if change.kind == "verdict" else abs(change.change) / 2
    good, bad = change.before_commit, change.after_commit
    return _walk(spec, results, good, bad, [point], threshold, log)


def _walk(
    spec: Path,
    results: Path,
    good: str | None,
    bad: str | None,
    points: list[str],
    threshold: float | None,
    log: logging.Logger,
) -> str:
    """`sweeper bisect` from `good` to `bad` on `points`: exactness when `threshold` is None,
    else output tok/s at it."""
    if not good or not bad or good.endswith("-dirty") or bad.endswith("-dirty"):
        line = f"not bisected: runtime commits {good or 'unknown'} and {bad or 'unknown'}"
        log.info(line)
        return line
    if good == bad:
        line = f"not bisected: both runs ran runtime commit {good[:10]}"
        log.info(line)
        return line
    argv = [sys.executable, "-m", "sweeper.cli", "bisect", str(spec), "--good", good, "--bad", bad]
    argv += ["--results", str(results), "--points", ",".join(dict.fromkeys(points))]
    if threshold is None:
        argv += ["--metric", "verdict"]
    else:
        argv += ["--metric", "output_tok_s", "--threshold", f"{threshold * 100:g}%"]
    log.info("bisecting: %s", " ".join(argv))
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    for line in done.stderr.splitlines():
        log.info("bisect: %s", line)
    lines = done.stdout.strip().splitlines()
    directory = Path(lines[-1]) if lines else None
    try:
        state = BisectState.load(directory) if directory is not None else None
    except (OSError, ValueError):
        state = None
    if state is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"bisect failed (exit {done.returncode}): {tail}"
    if state.answer is None:
        return f"bisect ended without an answer: {state.status} ({directory})"
    return f"bisect: {state.answer.summary} ({directory})"
