"""Damaged runs: read whole in memory by every read command, written back only by `repair`.

The append-only records are the source of truth and the parquet and CSV views are derived from
them, but each keeps a copy of the other's points: a view lost to a truncated write is rebuilt
from the records, and a record line lost to a cut or a hand edit comes back from the view
(`recover.py`). Read commands (report, compare, diagnose, best, ls) never write into a run:
`repaired` gives them a `Run` whose views are rebuilt in memory. `sweeper repair RUN` is the
one writer: it puts recovered rows back into the records, keeps every damaged line verbatim in
`damaged/`, and rewrites the views. Nothing any copy holds is dropped.
"""

from __future__ import annotations

import io
import json
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sweeper.results.manifest import upgrade_legacy_row
from sweeper.results.reader import (
    MANIFEST,
    POINTS_LOG,
    REQUESTS_LOG,
    Run,
    open_requests,
    read_run,
)
from sweeper.results.recover import RECORD_LOGS, Recovery, damage_said, recover
from sweeper.results.store import RunStore, atomic_write, new_run_id
from sweeper.statefile import MANIFEST as MANIFEST_KIND
from sweeper.statefile import check

#: Where `repair` keeps the lines it could not read, verbatim (one JSON object per line:
#: file, line, text, and why it is damaged).
DAMAGED_DIR = "damaged"


def broken_views(run_dir: Path) -> list[str]:
    """The derived views of a run that are missing, unreadable or behind the records."""
    return read_run(run_dir).broken_views()


class RepairError(ValueError):
    """A run directory that cannot be repaired (not a run, or its manifest is unreadable)."""


def repair(run_dir: Path) -> list[str]:
    """Put every recoverable row back into the records, keep the damaged lines aside, rewrite
    the views; one line per thing done (empty when nothing was broken)."""
    run_dir = Path(run_dir)
    try:  # a FIFO, a device or an oversized manifest: said as it is (UnsafeStateFile)
        check(run_dir / MANIFEST, MANIFEST_KIND)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise RepairError(f"{run_dir} is not a run directory (no {MANIFEST})") from None
    run = read_run(run_dir)
    if run.manifest is None:
        raise RepairError(
            f"{run_dir / MANIFEST} is unreadable (empty or truncated): the records in "
            f"{POINTS_LOG} are intact, but what was run cannot be rebuilt from them"
        )
    broken = run.broken_views()
    run.close()
    recovery = recover(run_dir)
    done = [f"rebuilt {name}" for name in broken]
    if recovery.damaged:
        kept = _keep_damaged(run_dir, recovery)
        done.append(
            f"kept {len(recovery.damaged)} damaged line(s) verbatim in {kept}: "
            + damage_said(recovery.damaged)
        )
    for line in recovery.lost:
        what = f"point {line.point_id}" if line.point_id else "a point whose id is unreadable"
        done.append(f"{line.file} line {line.line}: {what} is in no other copy (kept aside)")
    if recovery.damaged or recovery.recovered_ids:
        _rewrite_records(run_dir, recovery)
        done += [f"point {pid}: restored from the views" for pid in recovery.recovered_ids]
    if done:
        RunStore.open(run_dir).consolidate()
    return done


def repaired(run: Run) -> Run:
    """The run, or when any view is broken (and the manifest can be read) the run with its
    records recovered and its views rebuilt in memory, `Run.rebuilt` saying which were. Nothing
    is written: `sweeper repair` writes them."""
    broken = run.broken_views() if run.manifest is not None else []
    if not broken:
        return run
    run.close()
    return RecoveredRun(run.dir, recover(run.dir), broken)


class RecoveredRun(Run):
    """A run read from every copy of its records, its views built in memory."""

    def __init__(self, run_dir: Path, recovery: Recovery, broken: list[str]) -> None:
        super().__init__(run_dir)
        self.recovery = recovery
        self.rebuilt = broken

    @cached_property
    def point_lines(self) -> list[dict[str, Any]]:
        return [upgrade_legacy_row(row, self.engine) for row in self.recovery.points]

    @cached_property
    def _points_bytes(self) -> bytes | None:
        return _parquet_bytes(self.point_lines)

    @cached_property
    def samples(self) -> list[dict[str, Any]]:
        return self.recovery.samples

    @cached_property
    def _requests_file(self) -> pq.ParquetFile | None:
        rows = [upgrade_legacy_row(row, self.engine) for row in self.recovery.requests]
        return open_requests(pa.BufferReader(_parquet_bytes(rows)))

    @property
    def has_requests(self) -> bool:
        return True

    def broken_views(self) -> list[str]:
        return []


def _parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pd.DataFrame(rows).to_parquet(buffer, index=False)
    return buffer.getvalue()


def _keep_damaged(run_dir: Path, recovery: Recovery) -> Path:
    """Write the damaged lines to a new file under damaged/ (its name never reused)."""
    folder = run_dir / DAMAGED_DIR
    folder.mkdir(exist_ok=True)
    path = folder / f"{new_run_id()}.jsonl"
    text = "".join(
        json.dumps({"file": d.file, "line": d.line, "text": d.text, "why": d.why}) + "\n"
        for d in recovery.damaged
    )
    atomic_write(path, lambda p: p.write_text(text))
    return path.relative_to(run_dir)


def _rewrite_records(run_dir: Path, recovery: Recovery) -> None:
    """Each record file as its intact rows, then the rows recovered from the views."""
    extra = {POINTS_LOG: recovery.points_from_views, REQUESTS_LOG: recovery.requests_from_views}
    damaged = {d.file for d in recovery.damaged}
    for name in RECORD_LOGS:
        rows = [*recovery.rows.get(name, []), *extra.get(name, [])]
        if name not in damaged and not extra.get(name):
            continue
        _write_text(
            run_dir / name, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
        )


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda p: p.write_text(text))
