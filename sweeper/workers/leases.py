"""A run's host leases (`sweeper.hosts.lease`): one per host it starts servers on, taken before
any server starts, named after the run once its directory is open, given back at the end.

Which hosts and where their lease lies: a local host's in the controller machine's state
directory (`local_state_dir`: one lease for the machine, whatever a spec calls it), an SSH
host's under its `remote_root`. A Slurm host's lease is its allocation (Slurm gives a node to one
job at a time), and an endpoint the sweeper did not start is not its to lease. Hosts are taken
in one order (by where their lease lies), so two runs wanting the same hosts never each hold
one the other waits for. A lease whose holder is gone is taken over, and the server that holder
left running (its pidfile, its systemd unit) is stopped first: the new run's servers never
share the host with a dead run's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.hosts import Host, HostError
from sweeper.hosts.lease import (
    Controller,
    Holder,
    Lease,
    LeaseBusy,
    LeaseDamaged,
    boot_id,
    gone,
    lease_path,
    new_holder,
    read_lease,
    take,
)
from sweeper.hosts.local import LocalHost, local_state_dir
from sweeper.services import Service, ServiceError
from sweeper.services.local_process import ProcessService, read_pidfile, reap_pidfile
from sweeper.spec import HostSpec, SlurmHostSpec, Spec, SSHHostSpec

#: Seconds between looks at a busy host while waiting for it.
POLL_S = 5.0
#: Seconds between progress lines while waiting.
SAY_EVERY_S = 30.0


@dataclass(frozen=True)
class LeaseSite:
    """Where one spec host's lease lies."""

    name: str
    #: The lease file's directory on the host.
    state_dir: str
    #: How the host is reached: "local" or the SSH host spec.
    ssh: SSHHostSpec | None = None

    @property
    def key(self) -> str:
        where = "local" if self.ssh is None else f"{self.ssh.address}:{self.ssh.port or 22}"
        return f"{where}:{self.state_dir}"

    def open(self) -> Host:
        if self.ssh is None:
            return LocalHost(self.name)
        from sweeper.workers.backends import ssh_host_for  # paramiko only for SSH hosts

        return ssh_host_for(self.ssh)


def lease_sites(spec: Spec) -> list[tuple[LeaseSite, tuple[str, ...]]]:
    """The places the spec's hosts lease, in taking order, each with the spec host names that
    share it (one per place: two local hosts of a spec are one machine)."""
    sites: dict[str, tuple[LeaseSite, tuple[str, ...]]] = {}
    for host in spec.hosts:
        site = site_of(host)
        if site is not None:
            first, names = sites.get(site.key, (site, ()))
            sites[site.key] = (first, (*names, host.name))
    return [sites[key] for key in sorted(sites)]


def site_of(host: HostSpec) -> LeaseSite | None:
    if isinstance(host, SlurmHostSpec):
        return None  # its allocation is its lease
    if isinstance(host, SSHHostSpec):
        return LeaseSite(host.name, host.remote_root, host)
    return LeaseSite(host.name, local_state_dir())


@dataclass
class RunLeases:
    """The leases a run holds, each with the spec host names it covers."""

    held: list[tuple[Lease, tuple[str, ...]]] = field(default_factory=list)

    def name_run(self, run_id: str, servers: dict[str, dict[str, str]]) -> list[str]:
        """Write the run id and its hosts' servers into each lease; the problems, one line each
        (a lease lost meanwhile is said, never fatal: the run's own servers are unaffected)."""
        problems = []
        for lease, names in self.held:
            server = {k: v for name in names for k, v in servers.get(name, {}).items()}
            try:
                lease.update(run_id=run_id, server={**lease.holder.server, **server})
            except (HostError, OSError) as exc:
                problems.append(f"warning: host {lease.host.name}: {exc}")
        return problems

    def release(self) -> list[str]:
        """Give every lease back and close the hosts; the problems, one line each."""
        problems = []
        for lease, _ in self.held:
            try:
                if not lease.release():
                    problems.append(f"warning: host {lease.host.name}: its lease was taken over")
            except (HostError, OSError) as exc:
                problems.append(f"warning: host {lease.host.name}: lease not given back: {exc}")
            finally:
                lease.host.close()
        self.held.clear()
        return problems


def take_leases(spec: Spec, *, wait_s: float | None, say: Callable[[str], None]) -> RunLeases:
    """Take the lease of every host of the spec (`lease_sites`); LeaseBusy when one is held
    and `wait_s` is None or runs out (the leases taken so far are given back). A host that
    cannot be reached gets no lease (said): its points fail on their own while it stays so."""
    here = Controller.here()
    run = RunLeases()
    try:
        for site, names in lease_sites(spec):
            lease = _take_one(site, spec.name, here, wait_s, say)
            if lease is not None:
                run.held.append((lease, names))
    except BaseException:
        for line in run.release():
            say(line)
        raise
    return run


def _take_one(
    site: LeaseSite, sweep: str, here: Controller, wait_s: float | None, say: Callable[[str], None]
) -> Lease | None:
    host = site.open()
    started = time.monotonic()
    said_at: float | None = None
    path = lease_path(site.state_dir)
    try:
        host_boot = boot_id(host)
    except (HostError, OSError) as exc:
        # An unreachable host fails its own points later (as without leases): it is never a
        # reason to stop the other hosts' work. A host reached is leased or the run stops.
        say(f"warning: host {site.name}: unreachable, no lease taken ({_short(exc)})")
        host.close()
        return None
    while True:
        try:
            lease = take(host, path, new_holder(sweep, here, host_boot), here, _vet(site))
            break
        except LeaseBusy as busy:
            waited = time.monotonic() - started
            if wait_s is None or waited >= wait_s:
                host.close()
                raise
            if said_at is None or time.monotonic() - said_at >= SAY_EVERY_S:
                said_at = time.monotonic()
                limit = "" if math.isinf(wait_s) else f" of {wait_s:.0f} s"
                say(f"waiting for host {site.name}: {busy.holder.describe()} holds it "
                    f"(waited {waited:.0f} s{limit})")  # fmt: skip
            time.sleep(min(POLL_S, max(0.0, wait_s - waited)))
        except BaseException:
            host.close()
            raise
    if lease.took_over is not None:
        previous, why = lease.took_over
        stopped = stop_leftover(host, previous.server, site)
        say(
            f"host {site.name}: took over the lease of {previous.describe()}: {why}"
            + (f"; stopped its server ({stopped})" if stopped else "")
        )
    return lease


def _vet(site: LeaseSite) -> Callable[[Holder], None]:
    """Refuses to take over a gone holder whose server cannot be told from its pidfile (a
    damaged one): stopping it would be a guess, and leaving it would share the host."""

    def vet(previous: Holder) -> None:
        pidfile = previous.server.get("pidfile")
        if pidfile and site.ssh is None:
            try:
                read_pidfile(Path(pidfile))
            except ServiceError as exc:
                raise LeaseDamaged(
                    site.name, lease_path(site.state_dir),
                    f"names {previous.describe()}, which is gone, but not the server it kept: "
                    f"{exc}", "then start again (the lease is taken over)",
                ) from None  # fmt: skip

    return vet


def stop_leftover(host: Host, server: dict[str, str], site: LeaseSite) -> str:
    """Stop the server a gone holder left on the host; what was stopped ("" for nothing)."""
    try:
        if server.get("pidfile") and site.ssh is None:
            return f"pidfile {server['pidfile']}" if reap_pidfile(Path(server["pidfile"])) else ""
        if server.get("unit") and site.ssh is not None:
            from sweeper.services.systemd import SystemdService

            unit = SystemdService(
                host, unit=server["unit"], remote_root=site.state_dir, sudo=bool(server.get("sudo"))
            )
            if unit.show().running:
                unit.stop()
                return f"unit {unit.unit}"
    except (HostError, ServiceError, OSError) as exc:
        return f"could not stop it: {exc}"
    return ""


def server_of(service: Service) -> dict[str, str]:
    """What a takeover must stop if this run dies: a local process's pidfile, a unit's name."""
    if isinstance(service, ProcessService):
        return {"pidfile": str(service.pidfile.resolve())}
    from sweeper.services.systemd import SystemdService

    if isinstance(service, SystemdService):
        return {"unit": service.unit, **({"sudo": "1"} if service.sudo else {})}
    return {}


def lease_state(host: Host, state_dir: str, here: Controller | None = None) -> tuple[bool, str]:
    """Whether a live run holds the lease under `state_dir` on `host`, and what the lease says
    (`doctor`, `ls`); LeaseDamaged when it is no lease, HostError / OSError when the host
    cannot be read."""
    here = here or Controller.here()
    found = read_lease(host, lease_path(state_dir))
    if found is None:
        return False, "free"
    _, holder = found
    why = gone(holder, boot_id(host), here)
    if why is not None:
        return False, f"stale: {holder.describe()}; {why} (the next run takes it over)"
    return True, f"held by {holder.describe()}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
