"""Starting one server config on a host: stop the previous instance, launch this one, wait
until it is healthy, prove it is the instance and config asked for, and negotiate what its build
gives (`sweeper.services.readiness`); the host's facts and the proof go to the manifest.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

from sweeper.config import ServerConfig
from sweeper.engines.base import Engine
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
    ) -> Serving | None:
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
        state = Serving(base_url=serving_url(backend, launch.url or launch.port, tunnel))
        state.instance = instance
        tail = lambda: backend.service.logs(None)[0][-LOG_TAIL_CHARS:]  # noqa: E731
        try:
            waited = wait_healthy(
                backend.service, state.base_url, deadline, path=engine.health_path, log_tail=tail
            )
            where = Where(backend.host, backend.python, backend.sudo)
            identity = prove_identity(engine, state.base_url, instance, sc, where, previous)
            identity = negotiate(
                engine, state.base_url, sc, identity, probe_spec(self.spec.workload)
            )
        except ReadinessError as exc:
            if self.stop_event.is_set():
                return None
            raise StartFailed(exc.reason, exc.log_tail or tail()) from None
        state.identity, state.engine = identity, engine.bind(identity.capabilities)
        state.model = identity.model or self.spec.runtime.model
        known = self.recorder.store.manifest.hosts.get(host)
        facts = host_facts(backend, host, self.engine.name, identity, known)
        self.recorder.proven(host, sc.label, facts, identity_record(identity))
        self.recorder.timing(f"{host}.ready_s", waited)
        self.recorder.timing(f"{host}.restarts", 1)
        self.overhead_s.append(time.monotonic() - t0 - waited)
        return state
