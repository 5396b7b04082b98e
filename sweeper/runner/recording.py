"""What the runner writes while a sweep runs, from any host thread: a point's records (with the
placement of the server that served it), a failed point's row with its reason and log tail, the
manifest's host facts and identities, and the run's timings. One lock keeps the threads' writes
whole; only the runner (through this) writes into a run.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sweeper.measure.point import failed_point, point_columns
from sweeper.plan import Point
from sweeper.progress import SweepProgress
from sweeper.results.loads import LoadRecord, StartPhase, within_start
from sweeper.results.manifest import HostFacts, IdentityRecord
from sweeper.results.records import PointRecord, RequestRecord, SampleRecord
from sweeper.results.scores import ScoreRecord, SettledRecord
from sweeper.results.store import RunStore, utc_now
from sweeper.runner.serving import placed
from sweeper.services import Instance
from sweeper.workers.backends import Backend


@dataclass
class Recorder:
    """The run's one writer for the host threads (see the module docstring)."""

    store: RunStore
    progress: SweepProgress
    #: The engine's name, for the records' `engine` column.
    engine: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: point id -> the backend and instance serving it, for the placement columns of its
    #: record and the scheduler's words when it fails (`sweeper.runner.serving.placed`).
    serving: dict[str, tuple[Backend, Instance]] = field(default_factory=dict)

    def key(self, point: Point, attempt: str | None = None) -> dict[str, object]:
        """What identifies an attempt at `point` in every row it writes: a new one, or
        `attempt` (one stopped mid-way, whose kept samples it completes)."""
        attempt = attempt or RunStore.new_attempt()
        return point_columns(self.store.run_id, point, attempt, self.engine)

    def sample(self, row: dict[str, Any]) -> None:
        """One sample, kept as soon as it is drawn (before its point line)."""
        with self.lock:
            self.store.append_samples([SampleRecord(**row)])

    def commit(
        self,
        point: PointRecord,
        requests: list[RequestRecord],
        samples: list[SampleRecord] | None = None,
        scores: list[ScoreRecord] | None = None,
    ) -> None:
        serving = self.serving.pop(point.point_id, None)
        if serving is not None:
            point = placed(point, *serving)
        with self.lock:
            self.store.commit_point(point, requests, samples, scores)

    def settle(self, scores: list[ScoreRecord], settled: list[SettledRecord]) -> None:
        """Scores a later server gave recorded points, then the verdicts they settle."""
        with self.lock:
            if scores:
                self.store.append_scores(scores)
            if settled:
                self.store.settle(settled)

    def fail(
        self,
        backend: Backend,
        points: list[Point],
        reason: str,
        cursor: str | None,
        *,
        log_tail: str | None = None,
    ) -> None:
        """Record every point in `points` as failed with the reason and the service log tail."""
        log_text = backend.service.logs(cursor)[0]
        for point in points:
            log_path = self.store.write_log(point.point_id, log_text)
            row = failed_point(
                self.key(point),
                reason=reason,
                at=utc_now(),
                log_path=str(log_path.relative_to(self.store.dir)),
                log_tail=log_tail or log_text,
            )
            self.commit(row, [])
            self.progress.point_done(point.host, point.point_id, "failed", reason)

    def proven(self, host: str, label: str, facts: HostFacts, identity: IdentityRecord) -> None:
        """A host's facts and how its instance serving `label` was proven, into the manifest."""
        with self.lock:
            self.store.manifest.hosts[host] = facts
            self.store.manifest.identities[f"{host}/{label}"] = identity
            self.store.save_manifest()

    def load(
        self, host: str, label: str, launch_id: str, started: float, ready_s: float,
        phases: list[StartPhase],
    ) -> None:  # fmt: skip
        """One start of `label` on `host` (process started at unix `started`, healthy
        `ready_s` later) into the manifest, with the phases the server reported
        (`sweeper.results.loads.within_start`), ready from the health poll where it gave none."""
        kept = within_start(phases, ready_s)
        if not any(p.name == "ready" for p in kept):
            kept.append(
                StartPhase(name="ready", at_s=ready_s, source="health", evidence="/health 200")
            )
        with self.lock:
            loads = self.store.manifest.loads
            index = sum(1 for record in loads if record.host == host)
            at = datetime.fromtimestamp(started, timezone.utc).isoformat()
            loads.append(
                LoadRecord(
                    host=host,
                    label=label,
                    index=index,
                    launch_id=launch_id,
                    started_at=at,
                    ready_s=ready_s,
                    phases=kept,
                )
            )
            self.store.save_manifest()

    def planned_more(self, points: int) -> None:
        """`points` more than the plan's into the manifest's total (a winner confirmed on a
        fresh process: `sweeper.runner.sweep`)."""
        with self.lock:
            self.store.manifest.points_total += points
            self.store.save_manifest()

    def timing(self, key: str, value: float) -> None:
        with self.lock:
            timings = self.store.manifest.timings
            timings[key] = timings.get(key, 0.0) + value
