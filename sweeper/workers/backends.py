"""Which `Host` and `Service` serve a host of the spec: the only place that maps kinds to classes.

A local host gets `LocalHost` + `ProcessService`; an SSH host gets `SSHHost` + `SystemdService`
running the bundled runtime; a Slurm host gets workers (`slurm.py` here), each with a
`NodeHost` + `SlurmStepService` per allocation, and as its own service the run's jobs as a whole
(`SlurmRunService`: stopping it cancels them all). The runner only sees the `Backend`, so it
stays host-agnostic. A spec's `runtime.package` (a patched copy of the runtime) is what runs
on all of them: imported first locally, packed as the bundle remotely.
Nothing connects here: the connection, the bundle upload (once per content, see
`sweeper.services.bundle`) and the first unit start all happen inside the host's own sweep
thread, so an unreachable host fails its own points and never stops the others.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.hosts import Host
from sweeper.hosts.local import LocalHost
from sweeper.services import Service
from sweeper.services.bundle import (
    Bundle,
    deploy,
    pack_runtime,
    release_dir,
)
from sweeper.services.endpoint import EndpointService
from sweeper.services.engine_source import (
    check_out,
    local_sources_root,
    python_path,
    source_dir,
)
from sweeper.services.local_process import ProcessService
from sweeper.services.runtime_package import runtime_package_dir
from sweeper.spec import HostSpec, RemoteHostSpec, SlurmHostSpec, Spec, SSHHostSpec
from sweeper.workers import Workers

if TYPE_CHECKING:
    from sweeper.hosts.ssh import SSHHost

#: Seconds systemd waits for the unit's exec beyond the spec's readiness deadline.
START_MARGIN_S = 60.0


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
    #: Whether commands that touch the server's processes need sudo (a non-root SSH user).
    sudo: bool = False
    #: Environment the service adds to every launch (the bundle's PYTHONPATH under systemd).
    service_env: dict[str, str] = field(default_factory=dict)
    #: Workers sharing the host's configs, each on its own backend (a Slurm cluster's
    #: allocations); None: this backend runs them in order itself.
    workers: Workers | None = None


def open_backend(
    host_spec: HostSpec, spec: Spec, state_dir: Path, *, launched: bool = True, run_id: str = ""
) -> Backend:
    """Build the backend for one host; `state_dir` holds local pidfiles and logs; `run_id`
    names a Slurm host's jobs. When the engine launches nothing (an endpoint already running),
    the service manages nothing."""
    if not launched:
        return Backend(LocalHost(host_spec.name), EndpointService(), python=sys.executable)
    if host_spec.kind == "local":
        # A spec's own runtime package is imported first: it is the working directory (which
        # `python -m` puts first on sys.path) and the path.
        package = spec.runtime.package
        host = LocalHost(host_spec.name)
        service_env = {"PYTHONPATH": package} if package else {}
        source_path, prepare = engine_source(host, spec, local_sources_root())
        service_env = {"PYTHONPATH": source_path} if source_path else service_env
        return Backend(
            host=host,
            service=ProcessService(
                Path(state_dir) / host_spec.name, extra_env=service_env, prepare=prepare
            ),
            python=spec.runtime.python or sys.executable,
            workdir=package,
            service_env=service_env,
        )
    if host_spec.kind == "slurm":
        if not run_id:
            raise ValueError(f"{host_spec.name}: a slurm host needs the run id for its job names")
        return open_slurm_backend(host_spec, spec, run_id)
    return open_ssh_backend(host_spec, spec)


@functools.lru_cache(maxsize=4)
def runtime_bundle(package: str | None = None) -> Bundle:
    """The runtime packed once per controller process (all hosts share it): a spec's own
    package (`runtime.package`), else the installed one."""
    return pack_runtime(runtime_package_dir(package))


def engine_source(
    host: Host, spec: Spec, root: str
) -> tuple[str | None, Callable[[], None] | None]:
    """`runtime.source` on a host: the directory to put first on PYTHONPATH (None without a
    source), and what writes the commit's tree there before the first start (None when the
    work tree runs as it is)."""
    source = spec.runtime.source
    if source is None:
        return None, None
    if source.rev is None:
        return python_path(source.repo, source.path), None
    rev, dest = source.rev, source_dir(root, source.rev)
    return python_path(dest, source.path), lambda: check_out(
        host, source.repo, rev, dest, source.install
    )


def ssh_host_for(host_spec: RemoteHostSpec) -> SSHHost:
    """An (unconnected) SSHHost for a spec host, ~/.ssh/config applied."""
    # paramiko loads only when a spec has SSH hosts.
    from sweeper.hosts.ssh import SSHHost
    from sweeper.hosts.ssh_target import resolve_target

    target = resolve_target(
        host_spec.address,
        port=host_spec.port,
        user=host_spec.user,
        key_file=host_spec.key_file,
        known_hosts=host_spec.known_hosts,
    )
    return SSHHost(
        host_spec.name,
        target,
        accept_new_host_key=host_spec.accept_new_host_key,
        connect_timeout=host_spec.connect_timeout_s,
        sudo_allowed=isinstance(host_spec, SSHHostSpec) and host_spec.sudo,
    )


def unit_name(spec: Spec) -> str:
    """One unit per sweep name on a host: `ddtree-<sweep>.service`."""
    return f"ddtree-{spec.name}"


def open_ssh_backend(host_spec: SSHHostSpec, spec: Spec) -> Backend:
    """Host, systemd service and launch settings for one SSH host of the spec."""
    from sweeper.services.systemd import SystemdService

    host = ssh_host_for(host_spec)
    bundle = runtime_bundle(spec.runtime.package)
    release = release_dir(host_spec.remote_root, bundle)
    sudo = host_spec.sudo and host.target.user != "root"
    # The bundle comes first on the path: the host runs exactly the controller's runtime
    # (an engine's own checkout, `runtime.source`, before it).
    source_path, check_out_source = engine_source(host, spec, host_spec.remote_root)
    service_env = {"PYTHONPATH": f"{source_path}:{release}" if source_path else release}

    def prepare() -> None:
        deploy(host, host_spec.remote_root, bundle)
        if check_out_source is not None:
            check_out_source()

    service = SystemdService(
        host,
        unit=unit_name(spec),
        remote_root=host_spec.remote_root,
        sudo=sudo,
        extra_env=service_env,
        timeout_start_s=spec.runtime.ready_timeout_s + START_MARGIN_S,
        prepare=prepare,
    )
    tunnel = host_spec.access == "tunnel"
    return Backend(
        host=host,
        service=service,
        python=spec.runtime.python or host_spec.python,
        # direct: the controller connects to address:port, so listen on every interface;
        # tunnel: only the SSH server's direct-tcpip reaches it, on loopback.
        listen_host="127.0.0.1" if tunnel else "0.0.0.0",
        workdir=release,
        use_tunnel=tunnel,
        bundle_sha256=bundle.sha256,
        sudo=sudo,
        service_env=service_env,
    )


def open_slurm_backend(host_spec: SlurmHostSpec, spec: Spec, run_id: str) -> Backend:
    """The login host, the run's jobs as its service, and workers that each build a backend
    (the node as a host, a step service) for every allocation they hold."""
    # paramiko and the Slurm modules load only when a spec has Slurm hosts.
    from sweeper.hosts.slurm import Allocation, NodeHost, SlurmLogin
    from sweeper.plan import step_seconds
    from sweeper.services.slurm import SlurmRunService, SlurmStepService
    from sweeper.workers.allocation import allocation_options
    from sweeper.workers.slurm import SlurmWorkers, WorkerPolicy

    ssh = ssh_host_for(host_spec)
    login = SlurmLogin(ssh, run_id, allocation_options(host_spec), host_spec.shared_dir)
    bundle = runtime_bundle(spec.runtime.package)
    release = release_dir(host_spec.shared_dir, bundle)
    # The bundle comes first on the path: the nodes run exactly the controller's runtime.
    service_env = {"PYTHONPATH": release}
    python = spec.runtime.python or host_spec.python
    tunnel = host_spec.access == "tunnel"

    def on_node(allocation: Allocation) -> Backend:
        node = NodeHost(login, allocation)
        service = SlurmStepService(
            login, allocation, node, gpus=host_spec.gpus_per_node, extra_env=service_env
        )
        return Backend(
            host=node,
            service=service,
            python=python,
            listen_host="0.0.0.0",  # the node's address (direct) or the login host's (tunnel)
            workdir=release,
            use_tunnel=tunnel,
            bundle_sha256=bundle.sha256,
            service_env=service_env,
        )

    policy = WorkerPolicy(
        workers=host_spec.allocations,
        queue_wait_s=host_spec.queue_wait_s,
        replace_wait_s=host_spec.replace_wait_s,
        time_margin_s=host_spec.time_margin_s,
    )
    workers = SlurmWorkers(
        login,
        on_node,
        policy,
        # Each config as a load: a config planned as a switch is loaded by an allocation
        # that did not serve its load group (`HostPlan.loads`).
        estimate=lambda step: step_seconds(spec, step._replace(switch=False)),
        prepare=lambda: deploy(ssh, host_spec.shared_dir, bundle),
    )
    return Backend(
        host=ssh,
        service=SlurmRunService(login),
        python=python,
        listen_host="0.0.0.0",
        workdir=release,
        use_tunnel=tunnel,
        bundle_sha256=bundle.sha256,
        service_env=service_env,
        workers=workers,
    )
