"""Run directories: `results/<sweep>/<run id>/`, the manifest, append-only records, resume.

Records go to `samples.jsonl` (a point's seeded samples for its distribution test, when it
drew any), `scores.jsonl` (samples scored by a server's prefill), `requests.jsonl` and
`points.jsonl`, one JSON line each, written with a single `write` on an O_APPEND file and
fsync'd, so a SIGKILL loses at most a torn last line (cut off on reopening). A point's sample,
score and request rows are written before its point line; on load, they count only when their
`(point_id, attempt)` matches a completed point line, so rows from an interrupted attempt are
dropped and redone. Samples are written as they are drawn: a resumed attempt at a point takes
the id of the stopped attempt whose samples it finds (`interrupted_samples`) and draws only the
ones missing, so each sample is on disk once and counts with the point line. Scores a later
server adds to a recorded point, and the verdict they settle (`settled.jsonl`), come after its
point line (`sweeper.results.scores`). `requests.parquet`,
`points.parquet` and `points.csv` are derived views rewritten with temp + rename after each
point and at the end. Reading a run after the fact (report, compare, ls) goes through
`reader.py`'s `Run`.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.results.manifest import Manifest, RunStatus, upgrade_legacy_row
from sweeper.results.reader import (
    DERIVED_VIEWS,
    MANIFEST,
    POINTS_CSV,
    POINTS_LOG,
    POINTS_PARQUET,
    REQUESTS_LOG,
    REQUESTS_PARQUET,
    SAMPLES_LOG,
    SCORES_LOG,
    SETTLED_LOG,
    read_jsonl,
    settled_rows,
)
from sweeper.results.records import PointRecord, RequestRecord, SampleRecord
from sweeper.results.scores import ScoreRecord, SettledRecord, current_scores, settled_points
from sweeper.statefile import MANIFEST as MANIFEST_KIND
from sweeper.statefile import RECORDS, check, read_state


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    """UTC timestamp (ms) plus a short random suffix: sorts by start time, never collides."""
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z"
    return stamp + "-" + secrets.token_hex(3)


def _umask() -> int:
    """The process umask, read without changing it (os.umask sets it: racy with threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(tmp)` on a temp file in the same directory, fsync it, rename over `path`.
    The file gets the mode any other file would (0666 less the umask), not mkstemp's 0600."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename or not exc.errno:
            raise
        # pyarrow's and pandas' errors name no file: say which one could not be written.
        raise OSError(exc.errno, os.strerror(exc.errno), str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)


def _trim_torn_tail(path: Path) -> None:
    """Cut a last line that a kill left without its newline (it was never a complete record);
    a record file that is no regular one (a FIFO, a device link) is said, never opened."""
    if not (path.exists() or path.is_symlink()) or check(path, RECORDS) == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return
        fh.truncate(data.rfind(b"\n") + 1)
        fh.flush()
        os.fsync(fh.fileno())


def _append_lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    blob = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
    if not blob:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    size = os.fstat(fd).st_size
    try:
        written = 0
        while written < len(blob):  # a short write (disk filling up) is followed by ENOSPC
            written += os.write(fd, blob[written:])
        os.fsync(fd)
    except OSError:
        # Nothing of this batch counts: a torn line left behind would glue onto the next.
        os.ftruncate(fd, size)
        raise
    finally:
        os.close(fd)


class RunStore:
    """One run directory. Create with `create`, reopen for resume with `open`."""

    def __init__(self, run_dir: Path, manifest: Manifest) -> None:
        self.dir = Path(run_dir)
        self.manifest = manifest
        self.logs_dir = self.dir / "logs"
        #: The status manifest.json says on disk (a save on a full disk may have failed).
        self.saved_status: RunStatus = manifest.status

    @staticmethod
    def new_attempt() -> str:
        """A fresh id for one attempt at a point (see the module docstring)."""
        return secrets.token_hex(6)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @classmethod
    def create(cls, root: Path, manifest_fields: dict[str, Any]) -> RunStore:
        run_id = new_run_id()
        run_dir = Path(root) / manifest_fields["sweep"] / run_id
        (run_dir / "logs").mkdir(parents=True, exist_ok=False)
        manifest = Manifest(run_id=run_id, created_at=utc_now(), **manifest_fields)
        store = cls(run_dir, manifest)
        store.save_manifest()
        return store

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        run_dir = Path(run_dir)
        path = run_dir / MANIFEST
        if not path.exists():
            raise FileNotFoundError(f"{run_dir} is not a run directory (no {MANIFEST})")
        manifest = Manifest.model_validate_json(read_state(path, MANIFEST_KIND))
        for name in (SAMPLES_LOG, SCORES_LOG, REQUESTS_LOG, POINTS_LOG, SETTLED_LOG):
            _trim_torn_tail(run_dir / name)
        (run_dir / "logs").mkdir(exist_ok=True)
        return cls(run_dir, manifest)

    def begin(self, points_total: int) -> None:
        """Mark the run started (or resumed) with the number of points its plan has."""
        manifest = self.manifest
        manifest.points_total = points_total
        self.count_points()
        manifest.status = "running"
        if manifest.started_at is None:
            manifest.started_at = utc_now()
        else:
            manifest.resumed_at.append(utc_now())
        self.save_manifest()

    def finish(
        self,
        points: dict[str, dict[str, Any]],
        status: RunStatus,
        exit_code: int,
        wall_s: float,
        error: str | None = None,
    ) -> None:
        """Close the manifest with how the run (or this resumed part of it) ended, then
        rewrite the derived files (a failure there leaves the manifest already right)."""
        self.count_points(points)
        manifest = self.manifest
        manifest.timings["wall_s"] = manifest.timings.get("wall_s", 0.0) + wall_s
        manifest.status, manifest.exit_code, manifest.finished_at = status, exit_code, utc_now()
        manifest.error = error
        self.save_manifest()
        self.consolidate(points)

    def mark_failed(self, error: str, exit_code: int, status: RunStatus = "failed") -> None:
        """Best effort, for a run that died: the manifest says `failed` and why, never
        `running`. On a full disk the derived views (rebuilt from the records on resume or
        `sweeper repair`) are removed to make room for the manifest."""
        if self.saved_status != "running":
            return
        manifest = self.manifest
        if manifest.status == "running":  # else `finish` said how it ended, but did not save
            self.count_points()
            manifest.status, manifest.exit_code = status, exit_code
            manifest.finished_at, manifest.error = utc_now(), error
        try:
            self.save_manifest()
            return
        except OSError:
            for name in DERIVED_VIEWS:
                (self.dir / name).unlink(missing_ok=True)
        self.save_manifest()

    def save_manifest(self) -> None:
        text = self.manifest.model_dump_json(indent=2)
        atomic_write(self.dir / MANIFEST, lambda p: p.write_text(text))
        self.saved_status = self.manifest.status

    # -- records -----------------------------------------------------------------------------

    def append_point(
        self,
        point: PointRecord,
        requests: list[RequestRecord],
        samples: list[SampleRecord] | None = None,
        scores: list[ScoreRecord] | None = None,
    ) -> None:
        """Samples, scores and requests first, then the point line that makes them count (see
        the module docstring)."""
        if samples:
            self.append_samples(samples)
        if scores:
            self.append_scores(scores)
        _append_lines(self.dir / REQUESTS_LOG, (r.model_dump() for r in requests))
        _append_lines(self.dir / POINTS_LOG, [point.model_dump()])

    def commit_point(
        self,
        point: PointRecord,
        requests: list[RequestRecord],
        samples: list[SampleRecord] | None = None,
        scores: list[ScoreRecord] | None = None,
    ) -> None:
        """Record a finished point: append it, refresh the derived files and the manifest."""
        self.append_point(point, requests, samples, scores)
        points = self.points()
        self.count_points(points)
        self.save_manifest()
        self.consolidate(points)

    def append_samples(self, samples: list[SampleRecord]) -> None:
        """Samples as they are drawn, before their point line (see the module docstring)."""
        _append_lines(self.dir / SAMPLES_LOG, (s.model_dump() for s in samples))

    def append_scores(self, scores: list[ScoreRecord]) -> None:
        """Scores of samples already recorded (or about to be, with their point line)."""
        _append_lines(self.dir / SCORES_LOG, (s.model_dump() for s in scores))

    def settle(self, settled: list[SettledRecord]) -> None:
        """Append points' settled verdict columns and refresh the derived files."""
        _append_lines(self.dir / SETTLED_LOG, (s.model_dump(exclude_unset=True) for s in settled))
        self.consolidate()

    def count_points(self, points: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """The manifest's points_done / points_ok / points_failed, from the recorded points."""
        points = self.points() if points is None else points
        manifest = self.manifest
        manifest.points_done = len(points)
        manifest.points_ok = sum(p["status"] == "ok" for p in points.values())
        manifest.points_failed = manifest.points_done - manifest.points_ok

    def points(self) -> dict[str, dict[str, Any]]:
        """Completed points by point_id (a point appears once; the first line wins), each with
        its latest settled columns."""
        out: dict[str, dict[str, Any]] = {}
        for row in read_jsonl(self.dir / POINTS_LOG):
            out.setdefault(row["point_id"], upgrade_legacy_row(row, self.engine))
        return settled_points(out, settled_rows(self.dir / SETTLED_LOG)[0])

    def requests(self, points: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Request rows of completed points only, from the attempt that completed."""
        points = self.points() if points is None else points
        keep = {(pid, p.get("attempt")) for pid, p in points.items()}
        return [
            upgrade_legacy_row(r, self.engine)
            for r in read_jsonl(self.dir / REQUESTS_LOG)
            if (r.get("point_id"), r.get("attempt")) in keep
        ]

    def samples(self, points: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Sample rows of completed points only, from the attempt that completed."""
        points = self.points() if points is None else points
        keep = {(pid, p.get("attempt")) for pid, p in points.items()}
        return [
            r
            for r in read_jsonl(self.dir / SAMPLES_LOG)
            if (r.get("point_id"), r.get("attempt")) in keep
        ]

    def interrupted_samples(self, points: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """Per point not in `points` (unrecorded), the samples an attempt at it drew before it
        was stopped: those of its attempt that drew the most, failed ones left out (drawn
        again). A resumed attempt takes that attempt's id, so they count once its point line is
        written, and draws only the rest. An attempt that wrote request rows was stopped
        mid-commit: its rows would count beside the new measurement's, so it is not taken."""
        committing = {
            (r.get("point_id"), r.get("attempt"))
            for r in read_jsonl(self.dir / REQUESTS_LOG)
            if r.get("point_id") not in points
        }
        attempts: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for row in read_jsonl(self.dir / SAMPLES_LOG):
            pid, attempt = row.get("point_id"), row.get("attempt")
            if pid in points or (pid, attempt) in committing or row.get("error"):
                continue
            attempts.setdefault(str(pid), {}).setdefault(str(attempt), []).append(row)
        return {pid: max(by.values(), key=len) for pid, by in attempts.items()}

    def scores(self, points: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Score rows of completed points' attempts, each output and scorer once."""
        points = self.points() if points is None else points
        return current_scores(read_jsonl(self.dir / SCORES_LOG), points)

    @property
    def engine(self) -> str:
        """The engine this run drives (rows written before the `mode` column are upgraded)."""
        return self.manifest.engine

    def consolidate(self, points: dict[str, dict[str, Any]] | None = None) -> None:
        """Rewrite requests.parquet, points.parquet and points.csv from the append-only logs."""
        points = self.points() if points is None else points
        requests = self.requests(points)
        points_df = pd.DataFrame(list(points.values()))
        requests_df = pd.DataFrame(requests)
        atomic_write(self.dir / POINTS_PARQUET, lambda p: points_df.to_parquet(p, index=False))
        atomic_write(self.dir / POINTS_CSV, lambda p: points_df.to_csv(p, index=False))
        atomic_write(self.dir / REQUESTS_PARQUET, lambda p: requests_df.to_parquet(p, index=False))

    def write_log(self, point_id: str, text: str) -> Path:
        path = self.logs_dir / f"{point_id}.log"
        atomic_write(path, lambda p: p.write_text(text))
        return path
