"""`sweeper doctor` for a Slurm host: is the cluster ready to run a sweep?

The login host over SSH (strict host keys), `sinfo` for the partition, then one short allocation
of the doctor's own (job `sweeper-doctor-<id>`, the spec's partition, account, GPUs...; cancelled
at the end, always): the shared directory written on the login host and read on the node, the
node's Python with the packages the engine needs, its GPUs, free space in the shared directory,
and the bundled runtime's `selftest` run as a step of that allocation.
"""

from __future__ import annotations

import contextlib
import secrets

from sweeper.doctor.checks import (
    SELFTEST_ARGS,
    Check,
    Checks,
    connectivity,
    disk,
    gpu_needed,
    gpus,
    needed_packages,
    python_packages,
    runtime_selftest,
)
from sweeper.hosts import HostError
from sweeper.hosts.slurm import Allocation, NodeHost, SlurmLogin
from sweeper.hosts.ssh import SSHHost
from sweeper.spec import SlurmHostSpec, Spec
from sweeper.workers.allocation import allocate, allocation_options
from sweeper.workers.backends import ssh_host_for

#: The doctor's allocation asks for this long at most (sbatch --time minutes).
DOCTOR_MINUTES = 15
#: How long the doctor waits in the queue when the spec sets no `queue_wait_s`.
DOCTOR_QUEUE_WAIT_S = 300.0


def check_slurm_host(
    host_spec: SlurmHostSpec,
    spec: Spec,
    *,
    sglang: bool = False,
    selftest: bool = True,
    selftest_args: tuple[str, ...] = SELFTEST_ARGS,
) -> list[Check]:
    """Every check against one Slurm host; never raises for a failing check."""
    ssh = ssh_host_for(host_spec)
    options = allocation_options(host_spec, max_minutes=DOCTOR_MINUTES)
    login = SlurmLogin(ssh, f"doctor-{secrets.token_hex(4)}", options, host_spec.shared_dir)
    python = spec.runtime.python or host_spec.python
    checks = Checks(host_spec.name)
    add = checks.add
    held: list[Allocation] = []
    try:
        if not add("connectivity", lambda: connectivity(ssh)):
            return checks.found
        add("partition", lambda: _partition(ssh, host_spec.partition))
        wait = host_spec.queue_wait_s or DOCTOR_QUEUE_WAIT_S
        if not add("allocation", lambda: _allocate(login, wait, held)):
            return checks.found
        node = NodeHost(login, held[0])
        add("shared_dir", lambda: _shared_dir(login, node))
        add("python", lambda: python_packages(node, python, needed_packages(spec, sglang)))
        add("gpus", lambda: gpus(node, gpu_needed(spec)))
        add("disk", lambda: disk(node, python, host_spec.shared_dir))
        if selftest:
            add(
                "selftest",
                lambda: runtime_selftest(node, host_spec.shared_dir, python, selftest_args),
            )
        return checks.found
    finally:
        with contextlib.suppress(HostError, OSError):
            login.cancel_run()
        ssh.close()


def _partition(ssh: SSHHost, partition: str | None) -> tuple[bool, str]:
    argv = ["sinfo", "-h", "-o", "%P|%a|%D|%t|%G"] + (["-p", partition] if partition else [])
    result = ssh.run(argv, check=False, timeout=30)
    if not result.ok:
        return False, f"sinfo failed: {result.stderr.strip()[-300:]}"
    rows = [line.split("|") for line in result.stdout.splitlines() if line.count("|") == 4]
    if not rows:
        return False, f"sinfo lists no partition {partition or '(default)'}"
    usable = [r for r in rows if r[1] == "up" and not r[3].startswith(("down", "drain"))]
    shown = "; ".join(f"{p} {a}: {n} node(s) {t}, gres {g}" for p, a, n, t, g in rows)
    return bool(usable), shown


def _allocate(login: SlurmLogin, wait_s: float, held: list[Allocation]) -> tuple[bool, str]:
    asked = allocate(login, deadline_s=wait_s)
    job, waited = asked.job, asked.waited
    if asked.allocation is not None:
        held.append(asked.allocation)
        return True, f"job {job} on {asked.allocation.node} after {waited:.1f} s in the queue"
    if asked.late is not None:
        line = asked.late
        return False, f"no node within {wait_s:.0f} s: job {job} {line.state} ({line.reason})"
    return False, asked.ended or f"job {job} did not run"


def _shared_dir(login: SlurmLogin, node: NodeHost) -> tuple[bool, str]:
    token = secrets.token_hex(8)
    path = f"{login.shared_dir}/.sweeper-doctor-{token}"
    login.ssh.put_file(path, token.encode())
    try:
        seen = node.run(["cat", path], check=False, timeout=60)
    finally:
        login.run(["rm", "-f", path], check=False)
    if seen.stdout.strip() != token:
        return False, f"{node.name} does not see {path}: {seen.stderr.strip()[-300:]}"
    return True, f"{login.shared_dir} written on {login.name}, read on {node.name}"
