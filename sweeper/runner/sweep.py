"""The order of a sweep (see the package docstring): hosts in parallel, each host's server
configs in order (or as a search hands them out), each config's points in order; the run's end
(status, exit code) once every host is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.engines.base import Engine
from sweeper.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_IO, exit_code_for
from sweeper.measure.inputs import Inputs
from sweeper.plan import HostPlan, Plan, Point, Step
from sweeper.plan.features import step_refusal
from sweeper.progress import SweepProgress
from sweeper.proof.calibration import calibrated_points
from sweeper.results.baseline import EarlierBaseline
from sweeper.results.manifest import RunStatus
from sweeper.results.store import RunStore
from sweeper.runner.measuring import PointMeasurer
from sweeper.runner.recording import Recorder
from sweeper.runner.sampled import Known, SampledProof
from sweeper.runner.scoring import ScoredProof, own_scorer
from sweeper.runner.scoring import Serving as Scorer
from sweeper.runner.serving import StartFailed, host_lost
from sweeper.runner.start import Starter
from sweeper.services import ServiceError
from sweeper.services.identity import Identity
from sweeper.spec import Spec
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
    _errors: list[str] = field(default_factory=list)
    #: Writing the results failed (disk full...): the run ends failed, raising it again.
    _io_error: OSError | None = None
    #: An earlier run's AR points as the baseline (`runtime.baseline_run`), when given.
    earlier: EarlierBaseline | None = None
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
        self.scoring = ScoredProof(self.spec, self.inputs)
        self._recorder = Recorder(self.store, self.progress, self.engine.name)
        shared = (self.spec, self.engine, self.progress, self._recorder, self.stop_event)
        self._starter = Starter(*shared, self.overhead_s)
        self._measurer = PointMeasurer(
            *shared, self.sampled, self.scoring, self.inputs, self.earlier, self.overhead_s
        )

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
        (`sweeper.proof.calibration.calibrated_points`)."""
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
        scorers = [s.server_config.label for s in host_plan.steps if s.scoring]
        known = Known(done, baseline_rows, {p.point_id: p for p in all_points})
        known.scorer_label = scorers[0] if scorers else None
        for row in self.store.samples(done):
            if row["host"] == host_plan.name:
                known.samples.setdefault(row["point_id"], []).append(row)
        for row in self.store.scores(done):
            if row["host"] == host_plan.name:
                known.add_score(row)
        interrupted = self.store.interrupted_samples(done)
        known.interrupted = {pid: rows for pid, rows in interrupted.items() if pid in known.points}
        settled = {pid for pid, row in done.items() if not row.get("scored_pending")}
        # Recorded points whose own server died before scoring their samples: their config's
        # work again, to score them (`_run_step`).
        own = {p for p, row in done.items() if row.get("scored_pending") and own_scorer(row)}

        def run_step(
            on: Backend, item: Work, previous: Identity | None, gate: Callable[[], bool] | None
        ) -> StepOutcome:
            return self._run_step(on, host_plan.name, item, previous, known, gate)

        def fail(points: list[Point], reason: str) -> None:
            self._fail(backend, points, reason, None, known)

        hooks = WorkerHooks[Backend](
            run_step=run_step,
            fail=fail,
            recorded=lambda point_id: point_id in done,
            progress=self.progress,
            stop=self.stop_event,
            timing=lambda key, value: self._recorder.timing(f"{host_plan.name}.{key}", value),
        )
        if self.order is not None:  # a search: one worker, the configs it picks (sweeper.search)
            InOrder(backend).run(host_plan.name, self.order(host_plan, done), hooks)
            return
        (backend.workers or InOrder(backend)).run(
            host_plan.name, pending_work(host_plan, done.keys() - own, settled), hooks
        )

    def _fail(
        self,
        backend: Backend,
        points: list[Point],
        reason: str,
        cursor: str | None,
        known: Known,
        log_tail: str | None = None,
    ) -> None:
        """Unrecorded points fail; recorded ones awaiting a scorer say why they still do."""
        self._recorder.settle([], self.scoring.unscored(points, known, reason))
        unrecorded = [p for p in points if p.point_id not in known.done]
        self._recorder.fail(backend, unrecorded, reason, cursor, log_tail=log_tail)

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
                state = self._starter.start(
                    backend, host, item.step.server_config, previous, tunnel
                )
            except StartFailed as failed:
                if host_lost(backend):
                    return StepOutcome(unmeasured=tuple(pending))
                if item.step.scoring:
                    why = f"the AR server could not be started to score them: {failed.reason}"
                    self._recorder.settle([], self.scoring.unscored(pending, known, why))
                    return StepOutcome()
                self._fail(backend, pending, failed.reason, None, known, failed.log_tail)
                return StepOutcome()
            if state is None:
                return StepOutcome(stopped=True)
            # A request feature its reported build would drop: never sent (`plan.features`).
            build = state.identity.proof.version if state.identity is not None else None
            step = item.step
            refused = step_refusal(
                self.spec.runtime.engine, step.server_config, step.request_configs, build
            )
            if refused is not None:
                self._fail(backend, pending, refused, None, known)
                return StepOutcome(state.identity)
            if state.instance is not None:
                self._recorder.serving.update(
                    (p.point_id, (backend, state.instance)) for p in pending
                )
            try:
                if gate is not None and not gate():
                    stopped = self.stop_event.is_set()
                    return StepOutcome(state.identity, stopped, () if stopped else tuple(pending))
                if item.step.scoring:
                    self._settle(item.step, item.points, state, known)
                    return StepOutcome(state.identity, self.stop_event.is_set())
                recorded = [p for p in pending if p.point_id in known.done]
                if recorded:  # their own server died before scoring them: this one does
                    self._settle(item.step, recorded, state, known, own=True)
                measure = [p for p in pending if p.point_id not in known.done]
                for n, point in enumerate(measure):
                    if self.stop_event.is_set():
                        return StepOutcome(state.identity, stopped=True)
                    exited = backend.service.state()
                    if exited.exited and exited.host_lost:
                        return StepOutcome(state.identity, unmeasured=tuple(measure[n:]))
                    if exited.exited:
                        code = f"runtime exited (code {exited.exit_code}) during the sweep"
                        self._recorder.fail(
                            backend, measure[n:], exited.reason or code, state.log_cursor
                        )
                        break
                    record = self._measurer.measure(backend, point, state, known)
                    if record is None:  # stopped mid-point: discarded, redone on resume
                        return StepOutcome(state.identity, stopped=True)
                    known.done[point.point_id] = record
            finally:
                for point in pending:
                    self._recorder.serving.pop(point.point_id, None)
        return StepOutcome(state.identity)

    def _settle(
        self, step: Step, points: list[Point], state: Any, known: Known, *, own: bool = False
    ) -> None:
        """A scoring restart, or (`own`) a restart of the points' own config: the recorded
        points it scores get their scores and verdicts."""
        sc = step.server_config
        host = points[0].host if points else ""
        self.progress.status(host, f"{sc.label} scoring")
        engine = state.engine or self.engine
        scorer = Scorer(state.base_url, state.model, engine, sc.id, sc.label)
        records, settled = self.scoring.settle(points, scorer, known, own=own)
        if self.stop_event.is_set():
            return
        self._recorder.settle(records, settled)
        for line in settled:
            known.done[line.point_id] = {**known.done[line.point_id], **line.model_dump()}
