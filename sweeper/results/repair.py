"""The append-only records are the source of truth; the parquet and CSV views are rebuilt from
them when they are missing or unreadable (a truncated file, a full disk, a hand edit).

`broken_views` only reads (schema and footer, never the data); `repair` rewrites every view from
`points.jsonl` and `requests.jsonl` exactly as the run does after each point. Report, compare and
diagnose call `ensure_views` first, and `sweeper repair RUN` does it on demand.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from sweeper.results.reader import MANIFEST, POINTS_LOG, read_jsonl, read_manifest
from sweeper.results.store import DERIVED_VIEWS, RunStore


def _readable(path: Path) -> bool:
    try:
        if path.suffix == ".parquet":
            pq.read_metadata(path)
        else:
            pd.read_csv(path, nrows=1)
    except pd.errors.EmptyDataError:
        return path.stat().st_size == 0 and not (path.parent / POINTS_LOG).stat().st_size
    except (OSError, ValueError):  # ArrowInvalid is a ValueError
        return False
    return True


def broken_views(run_dir: Path) -> list[str]:
    """The derived views of a run that are missing, unreadable or behind the records (a run
    that died before rewriting them); none for a run without records."""
    run_dir = Path(run_dir)
    if not (run_dir / POINTS_LOG).is_file():
        return []
    broken = [name for name in DERIVED_VIEWS if not _readable(run_dir / name)]
    if "points.parquet" not in broken:
        recorded = len({row.get("point_id") for row in read_jsonl(run_dir / POINTS_LOG)})
        if pq.read_metadata(run_dir / "points.parquet").num_rows != recorded:
            broken.append("points.parquet (behind the records)")
    return broken


class RepairError(ValueError):
    """A run directory that cannot be repaired (not a run, or its manifest is unreadable)."""


def repair(run_dir: Path) -> list[str]:
    """Rewrite every derived view from the records; the names of those that were broken."""
    run_dir = Path(run_dir)
    if not (run_dir / MANIFEST).is_file():
        raise RepairError(f"{run_dir} is not a run directory (no {MANIFEST})")
    if read_manifest(run_dir) is None:
        raise RepairError(
            f"{run_dir / MANIFEST} is unreadable (empty or truncated): the records in "
            f"{POINTS_LOG} are intact, but what was run cannot be rebuilt from them"
        )
    broken = broken_views(run_dir)
    RunStore.open(run_dir).consolidate()
    return broken


def ensure_views(run_dir: Path) -> list[str]:
    """Rebuild the views when any is broken (and the manifest can be read); what was rebuilt."""
    if not broken_views(run_dir) or read_manifest(run_dir) is None:
        return []
    return repair(run_dir)
