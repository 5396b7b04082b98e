"""The one place that knows the order of a sweep.

Per host (hosts in parallel, one thread each): for each server config, AR baseline first:
stop the previous instance -> start -> readiness + identity -> for each request config: measure
-> record. A point that cannot be measured (start failure, readiness timeout, identity mismatch,
request errors) is recorded as failed with its reason and log tail, and the sweep goes on.
Points already complete in the run directory are skipped (resume). On a stop request (Ctrl-C)
the point in flight is discarded, never recorded half, and the server is stopped.
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.analysis.verdicts import VIOLATIONS
from sweeper.engines.base import Engine
from sweeper.hosts.facts import system_facts
from sweeper.measure.drive import drive_point, records_tokens
from sweeper.measure.point import (
    LOG_TAIL_CHARS,
    Counters,
    failed_point,
    measured_point,
    point_columns,
)
from sweeper.measure.readiness import (
    Identity,
    ReadinessError,
    Where,
    prove_identity,
    wait_healthy,
)
from sweeper.plan import HostPlan, Plan, Point, ServerConfig
from sweeper.progress import SweepProgress
from sweeper.results.baseline import EarlierBaseline
from sweeper.results.records import HostFacts, IdentityRecord, PointRecord, RequestRecord
from sweeper.results.store import RunStore, utc_now
from sweeper.services import ServiceError
from sweeper.services.backends import Backend
from sweeper.spec import Spec, resolve_secrets

EXIT_OK, EXIT_FAILED, EXIT_VIOLATION, EXIT_INTERRUPTED = 0, 3, 4, 130


def exit_code_for(points: Mapping[str, Mapping[str, Any]]) -> int:
    """4 if any determinism violation, else 3 if any point failed, else 0."""
    rows = list(points.values())
    if any(p.get("determinism") in VIOLATIONS for p in rows):
        return EXIT_VIOLATION
    if any(p.get("status") != "ok" for p in rows):
        return EXIT_FAILED
    return EXIT_OK


@dataclass
class _Step:
    """What one host thread knows about the instance currently serving."""

    base_url: str = ""
    identity: Identity | None = None
    log_cursor: str | None = None
    warm: bool = False
    #: The served model name requests must carry (OpenAI's required `model`).
    model: str | None = None


@dataclass
class Runner:
    """Runs a plan into a store; `run()` returns the exit code."""

    spec: Spec
    plan: Plan
    store: RunStore
    backends: Mapping[str, Backend]
    progress: SweepProgress
    engine: Engine
    stop_event: threading.Event = field(default_factory=threading.Event)
    #: Seconds spent outside model load and measurement, per point (for the overhead bench).
    overhead_s: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _errors: list[str] = field(default_factory=list)
    #: An earlier run's AR points as the baseline (`runtime.baseline_run`), when given.
    earlier: EarlierBaseline | None = None

    def __post_init__(self) -> None:
        if self.spec.runtime.baseline_run and self.earlier is None:
            self.earlier = EarlierBaseline(Path(self.spec.runtime.baseline_run))

    # -- whole run ---------------------------------------------------------------------------

    def run(self) -> int:
        manifest = self.store.manifest
        manifest.points_total = self.plan.n_points
        self.store.count_points()
        manifest.status = "running"
        if manifest.started_at is None:
            manifest.started_at = utc_now()
        else:
            manifest.resumed_at.append(utc_now())
        self.store.save_manifest()
        started = time.monotonic()
        threads = [
            threading.Thread(target=self._host_thread, args=(hp,), name=f"host-{hp.name}")
            for hp in self.plan.hosts
        ]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            self.stop_event.set()
            self._stop_all()  # in-flight requests then fail fast; their point is discarded
            for t in threads:
                t.join()
        finally:
            self._stop_all(final=True)
        points = self.store.points()
        self.store.consolidate(points)
        self.store.count_points(points)
        manifest.timings["wall_s"] = manifest.timings.get("wall_s", 0.0) + (
            time.monotonic() - started
        )
        if self.stop_event.is_set():
            manifest.status, code = "interrupted", EXIT_INTERRUPTED
        elif self._errors:
            manifest.status, code = "failed", EXIT_FAILED
        else:
            code = exit_code_for(points)
            manifest.status = "complete"
        manifest.exit_code = code
        manifest.finished_at = utc_now()
        self.store.save_manifest()
        return code

    def _stop_all(self, final: bool = False) -> None:
        for name, backend in self.backends.items():
            if final and self.spec.leave_running and not self.stop_event.is_set():
                continue
            try:
                backend.service.stop()
            except ServiceError as exc:
                self._errors.append(f"{name}: {exc}")

    # -- one host ----------------------------------------------------------------------------

    def _host_thread(self, host_plan: HostPlan) -> None:
        try:
            self._run_host(host_plan)
        except Exception as exc:  # noqa: BLE001 - a host's crash must not hide the others
            self._errors.append(f"{host_plan.name}: {type(exc).__name__}: {exc}")
            self.progress.status(host_plan.name, f"error: {exc}")
        finally:
            self.progress.host_done(host_plan.name)

    def _run_host(self, host_plan: HostPlan) -> None:
        backend = self.backends[host_plan.name]
        done = self.store.points()
        all_points = list(host_plan.points())
        self.progress.host_started(
            host_plan.name, len(all_points), sum(p.point_id in done for p in all_points)
        )
        baseline_rows: dict[str, list[dict[str, Any]]] = {}
        for row in self.store.requests(done):
            if row["host"] == host_plan.name and row["mode"] == "ar":
                baseline_rows.setdefault(row["point_id"], []).append(row)
        previous: Identity | None = None
        for step in host_plan.steps:
            points = [p for p in all_points if p.server_config.id == step.server_config.id]
            pending = [p for p in points if p.point_id not in done]
            if not pending or self.stop_event.is_set():
                continue
            with ExitStack() as tunnel:
                state = self._start(
                    backend, host_plan.name, step.server_config, pending, previous, tunnel
                )
                if state is None:
                    continue
                previous = state.identity
                for n, point in enumerate(pending):
                    if self.stop_event.is_set():
                        return
                    exited = backend.service.state()
                    if exited.exited:
                        reason = f"runtime exited (code {exited.exit_code}) during the sweep"
                        self._fail(backend, pending[n:], reason, state.log_cursor)
                        break
                    record = self._measure(backend, point, state, done, baseline_rows)
                    if record is None:
                        return  # stopped mid-point: discarded, redone on resume
                    done[point.point_id] = record

    def _start(
        self,
        backend: Backend,
        host: str,
        sc: ServerConfig,
        pending: list[Point],
        previous: Identity | None,
        tunnel: ExitStack,
    ) -> _Step | None:
        """Stop the previous instance, start this config, prove it; None (points failed) if not."""
        t0 = time.monotonic()
        self.progress.status(host, f"starting {sc.label}")
        engine, deadline = self.engine, self.spec.runtime.ready_timeout_s
        try:
            launch = engine.launch(
                sc,
                python=backend.python,
                listen_host=backend.listen_host,
                workdir=backend.workdir,
                secrets=resolve_secrets(self.spec.runtime),
            )
            backend.service.stop()
            instance = backend.service.start(launch)
        except (ServiceError, ValueError) as exc:
            self._fail(backend, pending, f"start failed: {exc}", None)
            return None
        if self.stop_event.is_set():
            return None
        state = _Step(base_url=self._base_url(backend, launch.url or launch.port, tunnel))
        tail = lambda: self._log_tail(backend)  # noqa: E731
        try:
            waited = wait_healthy(
                backend.service, state.base_url, deadline, path=engine.health_path, log_tail=tail
            )
            where = Where(backend.host, backend.python, backend.sudo)
            identity = prove_identity(engine, state.base_url, instance, sc, where, previous)
        except ReadinessError as exc:
            if not self.stop_event.is_set():
                self._fail(backend, pending, exc.reason, None, log_tail=exc.log_tail or tail())
            return None
        state.identity = identity
        state.model = identity.model or self.spec.runtime.model
        self._note_host(backend, host, sc, identity)
        with self._lock:
            timings = self.store.manifest.timings
            timings[f"{host}.ready_s"] = timings.get(f"{host}.ready_s", 0.0) + waited
            timings[f"{host}.restarts"] = timings.get(f"{host}.restarts", 0.0) + 1
        self.overhead_s.append(time.monotonic() - t0 - waited)
        return state

    @staticmethod
    def _base_url(backend: Backend, port: int | str, tunnel: ExitStack) -> str:
        """The server's URL as the controller reaches it (an endpoint's own URL as given); a
        tunnel stays open for the step."""
        if isinstance(port, str):
            return port
        if backend.use_tunnel:
            local_port = tunnel.enter_context(backend.host.open_tunnel(port))
            return f"http://127.0.0.1:{local_port}"
        return f"http://{backend.host.address}:{port}"

    def _measure(
        self,
        backend: Backend,
        point: Point,
        state: _Step,
        done: dict[str, dict[str, Any]],
        baseline_rows: dict[str, list[dict[str, Any]]],
    ) -> dict[str, Any] | None:
        host, sc = point.host, point.server_config
        t0 = time.monotonic()
        started_at = utc_now()
        self.progress.status(host, f"{sc.label} {point.request_config.id}")
        workload = self.spec.workload
        counters = Counters(self.engine, state.base_url)
        result = drive_point(
            state.base_url,
            point,
            workload,
            self.spec.runtime,
            self.engine,
            warmup=0 if state.warm else workload.warmup,
            model=state.model,
            after_warmup=counters.start,
        )
        self.progress.tokens(host, records_tokens(result))
        state.warm = True
        if self.stop_event.is_set():
            return None
        acceptance = counters.delta()
        log_text, state.log_cursor = backend.service.logs(state.log_cursor)
        log_path = self.store.write_log(point.point_id, log_text)
        record, requests = measured_point(
            point,
            result,
            key=point_columns(self.store.run_id, point, RunStore.new_attempt(), self.engine.name),
            policy=self.spec.determinism,
            baseline_rows=(
                baseline_rows.get(point.baseline_point_id or "")
                if self.earlier is None
                else self.earlier.rows_for(point)
            ),
            baseline_point=(
                done.get(point.baseline_point_id or "")
                if self.earlier is None
                else self.earlier.point_for(point)
            ),
            fingerprint=state.identity.fingerprint if state.identity else None,
            started_at=started_at,
            finished_at=utc_now(),
            log_path=str(log_path.relative_to(self.store.dir)),
            log_text=log_text,
            acceptance=acceptance,
            slo=self.spec.slo,
        )
        self._commit(record, requests)
        if sc.mode == "ar":
            baseline_rows[point.point_id] = [r.model_dump() for r in requests]
        self.overhead_s.append(time.monotonic() - t0 - result.wall_s)
        detail = (
            f"{record.output_tok_s or 0:.1f} tok/s  {record.determinism}"
            if record.status == "ok"
            else record.reason
        )
        self.progress.point_done(host, point.point_id, record.status, detail)
        return record.model_dump()

    def _fail(
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
                point_columns(self.store.run_id, point, RunStore.new_attempt(), self.engine.name),
                reason=reason,
                at=utc_now(),
                log_path=str(log_path.relative_to(self.store.dir)),
                log_tail=log_tail or log_text,
            )
            self._commit(row, [])
            self.progress.point_done(point.host, point.point_id, "failed", reason)

    def _commit(self, point: PointRecord, requests: list[RequestRecord]) -> None:
        with self._lock:
            self.store.commit_point(point, requests)

    def _note_host(self, backend: Backend, host: str, sc: ServerConfig, identity: Identity) -> None:
        info = identity.proof.info
        known = self.store.manifest.hosts.get(host)
        system = known.system if known and known.system else system_facts(backend.host)
        facts = HostFacts(
            name=host,
            address=backend.host.address,
            engine=self.engine.name,
            runtime_version=identity.proof.version,
            reported_source_hash=identity.proof.source_hash,
            model=dict(info.get("model") or {}) if isinstance(info.get("model"), dict) else {},
            device=info.get("device"),
            bundle_sha256=backend.bundle_sha256,
            controller=platform.node(),
            system=system,
        )
        proof = IdentityRecord(
            fingerprint=identity.fingerprint,
            pid=identity.process.pid if identity.process else None,
            proven=list(identity.proven),
            unproven=list(identity.unproven),
        )
        with self._lock:
            self.store.manifest.hosts[host] = facts
            self.store.manifest.identities[f"{host}/{sc.label}"] = proof
            self.store.save_manifest()

    @staticmethod
    def _log_tail(backend: Backend) -> str:
        return backend.service.logs(None)[0][-LOG_TAIL_CHARS:]
