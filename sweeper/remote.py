"""The backend of an SSH host: `SSHHost` + `SystemdService` running the bundled runtime.

Nothing connects here: the connection, the bundle upload (once per content, see `bundle.py`)
and the first unit start all happen inside the host's own sweep thread, so an unreachable host
fails its own points and never stops the others.
"""

from __future__ import annotations

import functools

from sweeper.backends import Backend
from sweeper.bundle import Bundle, deploy, pack_runtime, release_dir
from sweeper.hosts.ssh import SSHHost, resolve_target
from sweeper.services.systemd import SystemdService
from sweeper.spec import Spec, SSHHostSpec

#: Seconds systemd waits for the unit's exec beyond the spec's readiness deadline.
START_MARGIN_S = 60.0


@functools.lru_cache(maxsize=1)
def runtime_bundle() -> Bundle:
    """The runtime packed once per controller process (all hosts share it)."""
    return pack_runtime()


def ssh_host_for(host_spec: SSHHostSpec) -> SSHHost:
    """An (unconnected) SSHHost for a spec host, ~/.ssh/config applied."""
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
        sudo_allowed=host_spec.sudo,
    )


def unit_name(spec: Spec) -> str:
    """One unit per sweep name on a host: `ddtree-<sweep>.service`."""
    return f"ddtree-{spec.name}"


def open_ssh_backend(host_spec: SSHHostSpec, spec: Spec) -> Backend:
    """Host, systemd service and launch settings for one SSH host of the spec."""
    host = ssh_host_for(host_spec)
    bundle = runtime_bundle()
    release = release_dir(host_spec.remote_root, bundle)
    service = SystemdService(
        host,
        unit=unit_name(spec),
        remote_root=host_spec.remote_root,
        sudo=host_spec.sudo and host.target.user != "root",
        # The bundle comes first on the path: the host runs exactly the controller's runtime.
        extra_env={"PYTHONPATH": release},
        timeout_start_s=spec.runtime.ready_timeout_s + START_MARGIN_S,
        prepare=lambda: deploy(host, host_spec.remote_root, bundle),
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
    )
