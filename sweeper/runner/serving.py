"""What the runner records about the server serving a config: the host's facts and how the
instance was proven (manifest), where each point's server ran (placement columns such as the
Slurm job and step), and, for a failed point whose server is gone, the words of what ended it;
what a host thread knows about the instance serving now (`Serving`), and the URL the controller
reaches the server at.
"""

from __future__ import annotations

import platform
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from sweeper.engines.base import Engine
from sweeper.hosts.facts import system_facts
from sweeper.results.manifest import HostFacts, IdentityRecord
from sweeper.results.records import PointRecord
from sweeper.services import Instance
from sweeper.services.identity import Identity
from sweeper.workers.backends import Backend


@dataclass
class Serving:
    """What one host thread knows about the instance currently serving."""

    base_url: str = ""
    identity: Identity | None = None
    log_cursor: str | None = None
    warm: bool = False
    #: The served model name requests must carry (OpenAI's required `model`).
    model: str | None = None
    instance: Instance | None = None
    #: The run's engine bound to what this instance negotiated (`Engine.bind`).
    engine: Engine | None = None


class StartFailed(Exception):
    """A server config could not be started or proven; its points fail with this reason."""

    def __init__(self, reason: str, log_tail: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


def host_lost(backend: Backend) -> bool:
    """Whether the machine under the backend's server is gone (a Slurm allocation ended)."""
    try:
        return backend.service.state().host_lost
    except (RuntimeError, OSError):
        return False


def placed(point: PointRecord, backend: Backend, instance: Instance) -> PointRecord:
    """The record with the columns saying where its server ran, and, for a failed point whose
    server is gone, the words of what ended it (the scheduler's state and exit code) first."""
    update: dict[str, Any] = dict(instance.placement)
    if point.status == "failed":
        try:
            reason = backend.service.state().reason
        except (RuntimeError, OSError):
            reason = ""
        if reason and reason not in point.reason:
            update["reason"] = f"{reason}; {point.reason}"
    return point.model_copy(update=update) if update else point


def host_facts(
    backend: Backend, host: str, engine: str, identity: Identity, known: HostFacts | None
) -> HostFacts:
    """What the run learned about a host from the instance just proven there."""
    info = identity.proof.info
    return HostFacts(
        name=host,
        address=backend.host.address,
        engine=engine,
        runtime_version=identity.proof.version,
        reported_source_hash=identity.proof.source_hash,
        model=dict(info.get("model") or {}) if isinstance(info.get("model"), dict) else {},
        device=info.get("device"),
        bundle_sha256=backend.bundle_sha256,
        controller=platform.node(),
        system=known.system if known and known.system else system_facts(backend.host),
    )


def identity_record(identity: Identity) -> IdentityRecord:
    """How an instance was proven to be the one requested, and what could not be."""
    return IdentityRecord(
        fingerprint=identity.fingerprint,
        pid=identity.process.pid if identity.process else None,
        proven=list(identity.proven),
        unproven=list(identity.unproven),
        capabilities=identity.capabilities.to_dict() if identity.capabilities else None,
    )


def base_url(backend: Backend, port: int | str, tunnel: ExitStack) -> str:
    """The server's URL as the controller reaches it (an endpoint's own URL as given); a
    tunnel stays open for the step."""
    if isinstance(port, str):
        return port
    if backend.use_tunnel:
        local_port = tunnel.enter_context(backend.host.open_tunnel(port))
        return f"http://127.0.0.1:{local_port}"
    return f"http://{backend.host.address}:{port}"
