"""Which `Host` and `Service` serve a host of the spec: the only place that maps kinds to classes.

A local host gets `LocalHost` + `ProcessService`; the remote-hosts work adds ssh -> `SSHHost` +
`SystemdService` here. The runner only sees the `Backend`, so it stays host-agnostic.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from sweeper.hosts import Host
from sweeper.hosts.local import LocalHost
from sweeper.services import Service
from sweeper.services.process import ProcessService
from sweeper.spec import HostSpec, Spec


@dataclass
class Backend:
    """A host, the service that runs the runtime on it, and how to launch the runtime there."""

    host: Host
    service: Service
    #: Python interpreter on the host that runs `-m ddtree_runtime serve`.
    python: str
    #: Address the runtime listens on, as seen from the host itself.
    listen_host: str = "127.0.0.1"
    workdir: str | None = None
    #: Reach the runtime through `host.open_tunnel` instead of `host.address` directly.
    use_tunnel: bool = False
    #: Content hash of the runtime bundle deployed to the host (None: the local checkout runs).
    bundle_sha256: str | None = None


def open_backend(host_spec: HostSpec, spec: Spec, state_dir: Path) -> Backend:
    """Build the backend for one host; `state_dir` holds local pidfiles and logs."""
    if host_spec.kind == "local":
        return Backend(
            host=LocalHost(host_spec.name),
            service=ProcessService(Path(state_dir) / host_spec.name),
            python=spec.runtime.python or sys.executable,
        )
    from sweeper.remote import open_ssh_backend  # paramiko loads only when a spec has SSH hosts

    return open_ssh_backend(host_spec, spec)
