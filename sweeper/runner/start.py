"""Serving one server config on a host: a load (stop the previous instance, launch this one,
wait until it is healthy) or an in-place switch of the instance serving (`Engine.switch`); then
prove it is the instance and config asked for (after a switch: the same process, now reporting
the new config) and negotiate what its build gives (`sweeper.services.readiness`); the host's
facts and the proof go to the manifest, and the run's timings count loads and switches.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace

import httpx

from sweeper.config import ServerConfig
from sweeper.engines.base import Capabilities, Engine, EngineError
from sweeper.engines.launch import Launch
from sweeper.measure.drive import probe_spec
from sweeper.measure.point import LOG_TAIL_CHARS
from sweeper.progress import SweepProgress
from sweeper.runner.recording import Recorder
from sweeper.runner.serving import Serving, StartFailed, host_facts, identity_record
from sweeper.runner.serving import base_url as serving_url
from sweeper.services import ServiceError
from sweeper.services.identity import Identity
from sweeper.services.readiness import (
    ReadinessError,
    Where,
    negotiate,
    prove_identity,
    wait_healthy,
)
from sweeper.spec import Spec, resolve_secrets
from sweeper.workers.backends import Backend


class SwitchRefused(Exception):
    """An in-place switch was refused or not proven: the config is loaded instead, and the
    manifest says why (`IdentityRecord.switch_refused`)."""


@dataclass
class Starter:
    """Starts and proves server configs for the runner's host threads."""

    spec: Spec
    engine: Engine
    progress: SweepProgress
    recorder: Recorder
    stop_event: threading.Event
    #: Seconds spent outside model load and measurement (the runner's, shared).
    overhead_s: list[float]

    def start(
        self,
        backend: Backend,
        host: str,
        sc: ServerConfig,
        previous: Identity | None,
        tunnel: ExitStack,
        refused: str | None = None,
    ) -> Serving | None:
        """Stop the previous instance, start this config, prove it; None when the sweep stops,
        StartFailed when it cannot be served. `refused`: why the switch to it was refused (a
        load instead), for the manifest."""
        t0 = time.monotonic()
        self.progress.status(host, f"starting {sc.label}")
        engine, deadline = self.engine, self.spec.runtime.ready_timeout_s
        try:
            launch = self._launch(backend, sc)
            backend.service.stop()
            instance = backend.service.start(launch)
            launched = time.time()
        except (ServiceError, ValueError) as exc:
            raise StartFailed(f"start failed: {exc}") from None
        if self.stop_event.is_set():
            return None
        state = Serving(base_url=serving_url(backend, launch.url or launch.port, tunnel))
        state.instance = instance
        tail = lambda: backend.service.logs(None)[0][-LOG_TAIL_CHARS:]  # noqa: E731
        try:
            waited = wait_healthy(
                backend.service, state.base_url, deadline, path=engine.health_path, log_tail=tail
            )
            healthy = time.time()
            where = Where(backend.host, backend.python, backend.sudo)
            identity = prove_identity(engine, state.base_url, instance, sc, where, previous)
            identity = negotiate(
                engine, state.base_url, sc, identity, probe_spec(self.spec.workload)
            )
        except ReadinessError as exc:
            if self.stop_event.is_set():
                return None
            raise StartFailed(exc.reason, exc.log_tail or tail()) from None
        self._serving(backend, host, sc, state, identity, refused)
        self.recorder.timing(f"{host}.ready_s", waited)
        self.recorder.timing(f"{host}.loads", 1)
        if engine.launched:  # where the start went (`sweeper.results.loads`)
            log = backend.service.logs(None)[0]
            phases = engine.startup_phases(log, identity.proof.info, launched)
            self.recorder.load(
                host, sc.label, launch.launch_id, launched, healthy - launched, phases
            )
        self.overhead_s.append(time.monotonic() - t0 - waited)
        return state

    def switch(
        self, backend: Backend, host: str, sc: ServerConfig, live: Serving, live_mode: str
    ) -> Serving:
        """Switch the instance serving `live` (a `live_mode` config) to `sc` in place, then
        prove it as a start is proven, but as the same process; SwitchRefused (with why) when
        the engine refuses or the proof fails: the caller loads `sc` instead. What the process
        negotiated is negotiated again only where the mode changes (`carried`)."""
        t0 = time.monotonic()
        self.progress.status(host, f"switching to {sc.label}")
        assert live.instance is not None and live.identity is not None
        engine = self.engine
        rendered = self._launch(backend, sc)
        # The process keeps the load's argv, environment and launch id; it must now report sc.
        launch = replace(live.instance.launch, expected=rendered.expected)
        instance = replace(live.instance, launch=launch)
        try:
            with httpx.Client() as client:
                engine.switch(client, live.base_url, sc)
            switched = time.monotonic() - t0
            where = Where(backend.host, backend.python, backend.sudo)
            identity = prove_identity(
                engine, live.base_url, instance, sc, where, None, switched_from=live.identity
            )
            negotiated = live.identity.capabilities if live_mode == sc.mode else None
            if negotiated is not None:
                identity = replace(identity, capabilities=carried(negotiated))
            else:
                identity = negotiate(
                    engine, live.base_url, sc, identity, probe_spec(self.spec.workload)
                )
        except EngineError as exc:
            raise SwitchRefused(str(exc)) from None
        except ReadinessError as exc:
            raise SwitchRefused(f"the switched server failed its proof: {exc.reason}") from None
        # As warm as it was: the process served before, and the engine's switch warms what the
        # new config needs itself (the runtime's first verify, where a graph is captured), so a
        # warm-up request here would only cost a generation in every config's gap.
        state = Serving(
            base_url=live.base_url, log_cursor=live.log_cursor, instance=instance, warm=live.warm
        )
        self._serving(backend, host, sc, state, identity, None, switched=True)
        self.recorder.timing(f"{host}.switch_s", switched)
        self.recorder.timing(f"{host}.switches", 1)
        return state

    def _launch(self, backend: Backend, sc: ServerConfig) -> Launch:
        """`sc`'s launch as the engine renders it for `backend` (what a load starts, and what a
        switched process must then report)."""
        return self.engine.launch(
            sc,
            python=backend.python,
            listen_host=backend.listen_host,
            workdir=backend.workdir,
            secrets=resolve_secrets(self.spec.runtime),
        )

    def _serving(
        self,
        backend: Backend,
        host: str,
        sc: ServerConfig,
        state: Serving,
        identity: Identity,
        refused: str | None,
        *,
        switched: bool = False,
    ) -> None:
        """The proven instance into `state` and the manifest, with how it came to serve."""
        state.identity, state.engine = identity, self.engine.bind(identity.capabilities)
        state.model = identity.model or self.spec.runtime.model
        known = self.recorder.store.manifest.hosts.get(host)
        facts = host_facts(backend, host, self.engine.name, identity, known)
        record = identity_record(identity).model_copy(
            update={"served_by": "switch" if switched else "load", "switch_refused": refused}
        )
        self.recorder.proven(host, sc.label, facts, record)


#: The evidence line of capabilities a switch carried over from the same process.
CARRIED = "negotiated on this process before a switch: same build and mode, so the same paths"


def carried(capabilities: Capabilities) -> Capabilities:
    """`capabilities` negotiated on the process before an in-place switch, kept after it: which
    paths give ids, acceptance, margins, sampling and scores is the build's and the mode's
    (speculative or AR), and a switch changes neither, so they are not probed again (a probe
    per switch costs a generation and a scoring prefill). The identity proof still reads the
    new config back, and the first point's requests exercise it."""
    evidence = (*(e for e in capabilities.evidence if e != CARRIED), CARRIED)
    return replace(capabilities, evidence=evidence)
