"""The one place that knows the order of a sweep.

Per host (hosts in parallel, one thread each): for each server config, AR baseline first:
stop the previous instance -> start -> readiness + identity -> negotiation (what the build gives:
ids, acceptance, margins) -> for each request config: measure
-> record. A Slurm host's configs are shared by its workers, one allocation each
(`sweeper.workers`). A point that cannot be measured (start failure, readiness timeout, identity
mismatch, request errors) is recorded as failed with its reason and log tail, and the sweep goes
on. A search (`order` hook) hands out configs one at a time, each after the last is recorded.
Points already complete in the run directory are skipped (resume). On a stop request
(Ctrl-C) the point in flight is discarded, never recorded half, and the server is stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.analysis.calibration import calibrated_points
from sweeper.analysis.summary import summarize
from sweeper.engines.base import Engine
from sweeper.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_IO, exit_code_for
from sweeper.measure.drive import drive_point, records_tokens
from sweeper.measure.hostload import HostProbe
from sweeper.measure.inputs import Inputs
from sweeper.measure.point import (
    LOG_TAIL_CHARS,
    Counters,
    failed_point,
    measured_point,
    point_columns,
    request_rows,
)
from sweeper.measure.readiness import (
    ReadinessError,
    Where,
    negotiate,
    prove_identity,
    wait_healthy,
)
from sweeper.plan import HostPlan, Plan, Point, ServerConfig
from sweeper.progress import SweepProgress
from sweeper.results.baseline import EarlierBaseline
from sweeper.results.manifest import RunStatus
from sweeper.results.records import PointRecord, RequestRecord, SampleRecord
from sweeper.results.store import RunStore, utc_now
from sweeper.runner.sampled import Known, SampledProof
from sweeper.runner.serving import Serving as _Step
from sweeper.runner.serving import StartFailed, host_facts, host_lost, identity_record, placed
from sweeper.runner.serving import base_url as serving_url
from sweeper.services import Instance, ServiceError
from sweeper.services.identity import Identity
from sweeper.spec import Spec, resolve_secrets
from sweeper.workers import InOrder, StepOutcome, Work, WorkerHooks, pending_work
from sweeper.workers.backends import Backend


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
    #: Writing the results failed (disk full...): the run ends failed, raising it again.
    _io_error: OSError | None = None
    #: An earlier run's AR points as the baseline (`runtime.baseline_run`), when given.
    earlier: EarlierBaseline | None = None
    #: point id -> the backend and instance serving it, for the placement columns of its record
    #: and the scheduler's words when it fails (see `sweeper.runner.serving.placed`).
    _serving: dict[str, tuple[Backend, Instance]] = field(default_factory=dict)
    #: Which configs to run, one at a time, instead of the plan's order (a search's driver).
    order: Callable[[HostPlan, dict[str, dict[str, Any]]], Iterable[Work]] | None = None
    #: What the prompts need from a served model (synthetic ids, later turns' histories).
    inputs: Inputs | None = None
    #: The recorded points as judged at the end (`judged_points`), for the run's last lines.
    judged: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        earlier = self.spec.runtime.baseline_run
        if earlier and self.earlier is None:
            self.earlier = EarlierBaseline(Path(earlier))
        self.inputs = Inputs(self.spec.workload, self.store.dir, self.engine, earlier)
        self.sampled = SampledProof(self.spec, self.progress, self.inputs, self.earlier)

    # -- whole run ---------------------------------------------------------------------------

    def run(self) -> int:
        self.store.begin(self.plan.n_points)
        started = time.monotonic()
        # Each host thread sets its event when it ends. Not Thread.join: on Python 3.11 a
        # join interrupted by Ctrl-C marks a thread that still runs as stopped (bpo-45274's fix).
        done = [threading.Event() for _ in self.plan.hosts]
        for hp, ended in zip(self.plan.hosts, done, strict=True):
            args = (hp, ended)
            threading.Thread(target=self._host_thread, args=args, name=f"host-{hp.name}").start()
        try:
            while not all(ended.wait(0.2) for ended in done):
                pass
        except KeyboardInterrupt:
            self.stop_event.set()
            self._stop_all()  # in-flight requests then fail fast; their point is discarded
            for ended in done:
                ended.wait()
        finally:
            self._stop_all(final=True)
        points = self.store.points()
        status: RunStatus = "complete"
        self.judged = self.judged_points(points)
        code = exit_code_for(self.judged)
        if self.stop_event.is_set():
            status, code = "interrupted", EXIT_INTERRUPTED
        elif self._errors:  # the sweeper's own I/O error (disk full...) is not a point's
            status, code = "failed", EXIT_IO if self._io_error else EXIT_FAILED
        error = "; ".join(self._errors) or None
        self.store.finish(points, status, code, time.monotonic() - started, error=error)
        if self._io_error is not None:
            raise self._io_error
        return code

    def judged_points(self, points: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The recorded points as every judge reads them: the near-tie calibration applied
        (`sweeper.analysis.calibration.calibrated_points`)."""
        rows = calibrated_points(points.values(), self.store.requests(points))
        return {row["point_id"]: row for row in rows}

    def _stop_all(self, final: bool = False) -> None:
        for name, backend in self.backends.items():
            if final and self.spec.leave_running and not self.stop_event.is_set():
                continue
            try:
                backend.service.stop()
            except ServiceError as exc:
                self._errors.append(f"{name}: {exc}")

    # -- one host ----------------------------------------------------------------------------

    def _host_thread(self, host_plan: HostPlan, ended: threading.Event) -> None:
        try:
            self._run_host(host_plan)
        except Exception as exc:  # noqa: BLE001 - a host's crash must not hide the others
            self._errors.append(f"{host_plan.name}: {type(exc).__name__}: {exc}")
            self._io_error = exc if isinstance(exc, OSError) else self._io_error
            self.progress.status(host_plan.name, f"error: {exc}")
        finally:
            self.progress.host_done(host_plan.name)
            ended.set()

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
        known = Known(done, baseline_rows, {p.point_id: p for p in all_points})
        for row in self.store.samples(done):
            if row["host"] == host_plan.name:
                known.samples.setdefault(row["point_id"], []).append(row)

        def run_step(
            on: Backend, item: Work, previous: Identity | None, gate: Callable[[], bool] | None
        ) -> StepOutcome:
            return self._run_step(on, host_plan.name, item, previous, known, gate)

        hooks = WorkerHooks[Backend](
            run_step=run_step,
            fail=lambda points, reason: self._fail(backend, points, reason, None),
            recorded=lambda point_id: point_id in done,
            progress=self.progress,
            stop=self.stop_event,
            timing=lambda key, value: self._add_timing(f"{host_plan.name}.{key}", value),
        )
        if self.order is not None:  # a search: one worker, the configs it picks (sweeper.search)
            InOrder(backend).run(host_plan.name, self.order(host_plan, done), hooks)
            return
        (backend.workers or InOrder(backend)).run(
            host_plan.name, pending_work(host_plan, done), hooks
        )

    def _run_step(
        self,
        backend: Backend,
        host: str,
        item: Work,
        previous: Identity | None,
        known: Known,
        gate: Callable[[], bool] | None = None,
    ) -> StepOutcome:
        """One server config: start and prove it, then measure its points in order. Points the
        service cannot serve because the machine under it was lost are handed back unmeasured."""
        pending = item.points
        with ExitStack() as tunnel:
            try:
                state = self._start(backend, host, item.step.server_config, previous, tunnel)
            except StartFailed as failed:
                if host_lost(backend):
                    return StepOutcome(unmeasured=tuple(pending))
                self._fail(backend, pending, failed.reason, None, log_tail=failed.log_tail)
                return StepOutcome()
            if state is None:
                return StepOutcome(stopped=True)
            if state.instance is not None:
                self._serving.update((p.point_id, (backend, state.instance)) for p in pending)
            try:
                if gate is not None and not gate():
                    stopped = self.stop_event.is_set()
                    return StepOutcome(state.identity, stopped, () if stopped else tuple(pending))
                for n, point in enumerate(pending):
                    if self.stop_event.is_set():
                        return StepOutcome(state.identity, stopped=True)
                    exited = backend.service.state()
                    if exited.exited and exited.host_lost:
                        return StepOutcome(state.identity, unmeasured=tuple(pending[n:]))
                    if exited.exited:
                        code = f"runtime exited (code {exited.exit_code}) during the sweep"
                        self._fail(backend, pending[n:], exited.reason or code, state.log_cursor)
                        break
                    record = self._measure(backend, point, state, known)
                    if record is None:  # stopped mid-point: discarded, redone on resume
                        return StepOutcome(state.identity, stopped=True)
                    known.done[point.point_id] = record
            finally:
                for point in pending:
                    self._serving.pop(point.point_id, None)
        return StepOutcome(state.identity)

    def _start(
        self,
        backend: Backend,
        host: str,
        sc: ServerConfig,
        previous: Identity | None,
        tunnel: ExitStack,
    ) -> _Step | None:
        """Stop the previous instance, start this config, prove it; None when the sweep stops,
        StartFailed when it cannot be served."""
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
            raise StartFailed(f"start failed: {exc}") from None
        if self.stop_event.is_set():
            return None
        state = _Step(base_url=serving_url(backend, launch.url or launch.port, tunnel))
        state.instance = instance
        tail = lambda: backend.service.logs(None)[0][-LOG_TAIL_CHARS:]  # noqa: E731
        try:
            waited = wait_healthy(
                backend.service, state.base_url, deadline, path=engine.health_path, log_tail=tail
            )
            where = Where(backend.host, backend.python, backend.sudo)
            identity = prove_identity(engine, state.base_url, instance, sc, where, previous)
            identity = negotiate(engine, state.base_url, sc, identity, self.spec.workload)
        except ReadinessError as exc:
            if self.stop_event.is_set():
                return None
            raise StartFailed(exc.reason, exc.log_tail or tail()) from None
        state.identity, state.engine = identity, engine.bind(identity.capabilities)
        state.model = identity.model or self.spec.runtime.model
        facts = host_facts(
            backend, host, self.engine.name, identity, self.store.manifest.hosts.get(host)
        )
        with self._lock:
            self.store.manifest.hosts[host] = facts
            self.store.manifest.identities[f"{host}/{sc.label}"] = identity_record(identity)
            self.store.save_manifest()
        self._add_timing(f"{host}.ready_s", waited)
        self._add_timing(f"{host}.restarts", 1)
        self.overhead_s.append(time.monotonic() - t0 - waited)
        return state

    def _add_timing(self, key: str, value: float) -> None:
        with self._lock:
            timings = self.store.manifest.timings
            timings[key] = timings.get(key, 0.0) + value

    def _measure(
        self, backend: Backend, point: Point, state: _Step, known: Known
    ) -> dict[str, Any] | None:
        host, sc = point.host, point.server_config
        done = known.done
        t0 = time.monotonic()
        started_at = utc_now()
        self.progress.status(host, f"{sc.label} {point.request_config.id}")
        workload, engine = self.spec.workload, state.engine or self.engine
        check, unavailable = self.sampled.check(point, engine)
        counters = Counters(engine, state.base_url)
        probe = HostProbe(backend.host, state.instance.pid if state.instance else None)
        result = drive_point(
            state.base_url,
            point,
            workload,
            self.spec.runtime,
            engine,
            warmup=0 if state.warm else workload.warmup,
            model=state.model,
            after_warmup=lambda: [f() for f in (counters.start, probe.start)],
            inputs=self.inputs,
            sample_margins=check == "coupled" and sc.mode == "ar",
        )
        self.progress.tokens(host, records_tokens(result))
        state.warm = True
        if self.stop_event.is_set():
            return None
        acceptance = counters.delta()
        log_text, state.log_cursor = backend.service.logs(state.log_cursor)
        log_path = self.store.write_log(point.point_id, log_text)
        # Read as the measurement ends: judging below would count as another process's load.
        finished_at, host_load = utc_now(), probe.columns()
        key = point_columns(self.store.run_id, point, RunStore.new_attempt(), self.engine.name)
        rows = request_rows(result, key)
        drawn = self.sampled.draw(point, state.base_url, state.model, engine, key)
        if self.stop_event.is_set():
            return None
        known.samples[point.point_id] = drawn
        earlier, base = self.earlier, point.baseline_point_id or ""
        baseline_point = done.get(base) if earlier is None else earlier.point_for(point)
        verdict, sampled_columns = self.sampled.judge(point, baseline_point, known)
        summary, verdicts = summarize(
            point,
            rows,
            result.wall_s,
            policy=self.spec.determinism,
            baseline_rows=(
                known.baseline_rows.get(base) if earlier is None else earlier.rows_for(point)
            ),
            baseline_point=baseline_point,
            slo=self.spec.slo,
            speed_baseline_point=done.get(point.speed_baseline_point_id or ""),
            sampled_check=check,
            sampled_verdict=unavailable or verdict,
        )
        summary = {**summary, **sampled_columns}
        record, requests = measured_point(
            point,
            result,
            rows,
            summary=summary,
            verdicts=verdicts,
            key=key,
            baseline_point=baseline_point,
            fingerprint=state.identity.fingerprint if state.identity else None,
            started_at=started_at,
            finished_at=finished_at,
            log_path=str(log_path.relative_to(self.store.dir)),
            log_text=log_text,
            acceptance=acceptance,
            capabilities=engine.capabilities,
            host_load=host_load,
        )
        self._commit(record, requests, [SampleRecord(**row) for row in drawn])
        if sc.mode == "ar":
            known.baseline_rows[point.point_id] = [r.model_dump() for r in requests]
        self.overhead_s.append(time.monotonic() - t0 - result.wall_s)
        detail = f"{record.output_tok_s or 0:.1f} tok/s  {record.determinism}"
        detail = detail if record.status == "ok" else record.reason
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

    def _commit(
        self,
        point: PointRecord,
        requests: list[RequestRecord],
        samples: list[SampleRecord] | None = None,
    ) -> None:
        serving = self._serving.pop(point.point_id, None)
        if serving is not None:
            point = placed(point, *serving)
        with self._lock:
            self.store.commit_point(point, requests, samples)
