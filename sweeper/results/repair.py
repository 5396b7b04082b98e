"""The append-only records are the source of truth; the parquet and CSV views are rebuilt from
them when they are missing or unreadable (a truncated file, a full disk, a hand edit).

`Run.broken_views` only reads (footers, never the data); `repair` rewrites every view from
`points.jsonl` and `requests.jsonl` exactly as the run does after each point. Report, compare and
diagnose pass the run they read through `repaired`, and `sweeper repair RUN` does it on demand.
"""

from __future__ import annotations

from pathlib import Path

from sweeper.results.reader import MANIFEST, POINTS_LOG, Run, read_run
from sweeper.results.store import RunStore


def broken_views(run_dir: Path) -> list[str]:
    """The derived views of a run that are missing, unreadable or behind the records."""
    return read_run(run_dir).broken_views()


class RepairError(ValueError):
    """A run directory that cannot be repaired (not a run, or its manifest is unreadable)."""


def repair(run_dir: Path) -> list[str]:
    """Rewrite every derived view from the records; the names of those that were broken."""
    run_dir = Path(run_dir)
    if not (run_dir / MANIFEST).is_file():
        raise RepairError(f"{run_dir} is not a run directory (no {MANIFEST})")
    run = read_run(run_dir)
    if run.manifest is None:
        raise RepairError(
            f"{run_dir / MANIFEST} is unreadable (empty or truncated): the records in "
            f"{POINTS_LOG} are intact, but what was run cannot be rebuilt from them"
        )
    broken = run.broken_views()
    run.close()
    RunStore.open(run_dir).consolidate()
    return broken


def repaired(run: Run) -> Run:
    """The run, or when any view is broken (and the manifest can be read) the run read again
    after rebuilding them, `Run.rebuilt` saying which were. A sound run is read once: what the
    check read is kept for the reading that follows."""
    broken = run.broken_views() if run.manifest is not None else []
    if not broken:
        return run
    run.close()
    RunStore.open(run.dir).consolidate()
    fresh = read_run(run.dir)
    fresh.rebuilt = broken
    return fresh
