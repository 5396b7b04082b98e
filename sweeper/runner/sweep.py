"""The order of a sweep (see the package docstring): hosts in parallel, each host's server
configs in order (or as a search hands them out), each served by a load or, where the plan's
load groups allow (`sweeper.plan.loads`) and the running build agrees, by switching the
instance serving in place; each config's points in order; the run's end (status, exit code)
once every host is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sweeper.analysis.best import served_rows, to_confirm
from sweeper.config import ServerConfig
from sweeper.engines.base import Engine
from sweeper.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_IO, exit_code_for
from sweeper.measure.drive import probe_spec
from sweeper.measure.inputs import Inputs
from sweeper.plan import HostPlan, Plan, Point, Step
from sweeper.plan.features import step_refusal
from sweeper.plan.loads import load_key
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
from sweeper.runner.serving import Serving, StartFailed, host_lost
from sweeper.runner.start import Starter, SwitchRefused
from sweeper.services import ServiceError
from sweeper.services.identity import Identity
from sweeper.services.readiness import negotiate_features
from sweeper.spec import Spec
from sweeper.workers import InOrder, StepOutcome, Work, WorkerHooks, pending_work
from sweeper.workers.backends import Backend


@dataclass
class Live:
    """The instance serving on a backend: its state, the config it serves and the tunnel the
    controller reaches it through (open until the next load there). It holds the backend, so
    the backend's id (the runner's key) cannot name another backend while it lives."""

    state: Serving
    sc: ServerConfig
    tunnel: ExitStack
    backend: Backend


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
    #: The instance serving on each backend (by id), that a switch may reuse.
    _live: dict[int, Live] = field(default_factory=dict)

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
        # Points recorded beyond the plan's (winners confirmed on a fresh process) count too.
        planned = {p.point_id for p in self.plan.points()}
        beyond = 0 if self.order is not None else len(self.store.points().keys() - planned)
        self.store.begin(self.plan.n_points + beyond)
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
        for live in list(self._live.values()):
            live.tunnel.close()
        self._live.clear()
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
        scored = {p.point_id for p in all_points if p.scored_by}  # their outputs, scored later
        for row in self.store.requests(done):
            if row["host"] == host_plan.name and (row["mode"] == "ar" or row["point_id"] in scored):
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
        workers = backend.workers or InOrder(backend)
        workers.run(host_plan.name, pending_work(host_plan, done.keys() - own, settled), hooks)
        confirmed: set[tuple[str, str]] = set()
        while not self.stop_event.is_set() and (work := self._confirmation(host_plan, confirmed)):
            self._recorder.planned_more(len(work.points))
            self.progress.planned_more(host_plan.name, len(work.points))
            workers.run(host_plan.name, [work], hooks)

    def _confirmation(self, host_plan: HostPlan, confirmed: set[tuple[str, str]]) -> Work | None:
        """The next config that ranks first at some load levels but was measured there only
        after in-place switches (`sweeper.analysis.best.to_confirm`), as a fresh process of it:
        its next restart (a load), its points at those levels again; None when none is left.
        `confirmed` holds the (config, level) pairs measured so: each is confirmed once (added
        here); a confirmation that moves another switched config to first is followed by
        that one's."""
        points = self.judged_points(self.store.points())
        identities = {k: v.model_dump() for k, v in self.store.manifest.identities.items()}
        mine = [r for r in points.values() if r.get("host") == host_plan.name]
        constraints = self.spec.search.constraints if self.spec.search else None
        pending = to_confirm(served_rows(mine, identities), constraints)
        steps = {s.server_config.id: s for s in host_plan.steps}
        for config_id, named_at in pending.items():
            levels = [level for level in named_at if (config_id, level) not in confirmed]
            if config_id not in steps or not levels:
                continue
            step = steps[config_id]
            taken = steps.keys() | {str(r.get("server_config_id")) for r in mine}
            restart = step.server_config.restart + 1
            while step.server_config.again(restart).id in taken:
                restart += 1
            fresh = step.server_config.again(restart)
            again = [
                replace(p, server_config=fresh)
                for p in host_plan.points()
                if p.server_config.id == config_id and p.request_config.id in levels
            ]
            kept = tuple(rc for rc in step.request_configs if rc.id in levels)
            confirmed.update((config_id, level) for level in levels)
            return Work(Step(fresh, kept), again)
        return None

    def _serve(
        self, backend: Backend, host: str, step: Step, previous: Identity | None
    ) -> Serving | None:
        """The step's server config served on `backend`: switched in place from the instance
        serving there when the plan made the step a switch (`Step.switch`), the load key
        (`load_key`) is the same and the build switches every param that differs
        (`Engine.switchable`), else loaded (a switch refused at run time is loaded too, its
        reason in the manifest); None when the sweep stops."""
        sc = step.server_config
        live = self._live.pop(id(backend), None)
        refused = None
        if live is not None:
            if step.switch and self._switches(backend, live, sc):
                try:
                    switched = self._starter.switch(backend, host, sc, live.state, live.sc.mode)
                except SwitchRefused as why:
                    refused = str(why)
                else:
                    self._live[id(backend)] = Live(switched, sc, live.tunnel, backend)
                    return switched
            live.tunnel.close()
        tunnel = ExitStack()
        try:
            state = self._starter.start(backend, host, sc, previous, tunnel, refused)
        except BaseException:
            tunnel.close()
            raise
        if state is None:
            tunnel.close()
            return None
        self._live[id(backend)] = Live(state, sc, tunnel, backend)
        return state

    def _switches(self, backend: Backend, live: Live, sc: ServerConfig) -> bool:
        """Whether `sc` may be reached from the live instance in place (see `_serve`)."""
        key = load_key(self.spec, sc)
        if key is None or key != load_key(self.spec, live.sc) or backend.service.state().exited:
            return False
        caps = live.state.identity.capabilities if live.state.identity else None
        switchable = self.engine.switchable(caps)
        before, after = dict(live.sc.params), dict(sc.params)
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        return changed <= switchable

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
        try:
            state = self._serve(backend, host, item.step, previous)
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
        if refused is None and state.engine is not None:  # proven honoured, or refused
            refused = negotiate_features(
                state.engine, state.base_url, step.server_config, step.request_configs,
                probe_spec(self.spec.workload), state.model, build,
            )  # fmt: skip
        if refused is not None:
            self._fail(backend, pending, refused, None, known)
            return StepOutcome(state.identity)
        if state.instance is not None:
            self._recorder.serving.update((p.point_id, (backend, state.instance)) for p in pending)
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
