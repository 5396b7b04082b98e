"""Finding runs on disk for the report, compare and nightly: latest, previous finished, pruning.

Run ids start with a UTC timestamp, so sorting run directory names sorts runs by start time.
A run counts as finished when its manifest says `complete` (every planned point attempted, even
if some failed: comparing them is how new failures are found).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sweeper.report.assemble import read_manifest


def runs_of_sweep(sweep_dir: Path) -> list[Path]:
    """The run directories (those with a manifest) of one sweep, oldest first."""
    if not sweep_dir.is_dir():
        return []
    return sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").is_file())


def latest_run(results: Path) -> Path | None:
    """The newest run under a results root, across sweeps."""
    runs = [p.parent for p in Path(results).glob("*/*/manifest.json")]
    return max(runs, key=lambda p: p.name) if runs else None


def is_finished(run_dir: Path) -> bool:
    """True when the run's manifest says it completed."""
    return (read_manifest(run_dir) or {}).get("status") == "complete"


def previous_finished(run_dir: Path) -> Path | None:
    """The newest finished run of the same sweep that started before `run_dir`."""
    earlier = [p for p in runs_of_sweep(run_dir.parent) if p.name < run_dir.name]
    finished = [p for p in earlier if is_finished(p)]
    return finished[-1] if finished else None


def prune(sweep_dir: Path, keep: int, protect: Path | None = None) -> list[Path]:
    """Delete all but the newest `keep` runs of a sweep (never `protect`); return the deleted."""
    if keep < 1:
        raise ValueError("keep must be at least 1")
    runs = runs_of_sweep(sweep_dir)
    doomed = [p for p in runs[: max(0, len(runs) - keep)] if protect is None or p != protect]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
