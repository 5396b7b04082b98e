"""A real Slurm 22.05 (Debian 12 `slurm-wlm`) on three disposable test hosts: one controller that
is also the login host (munge + slurmctld + sshd) and two compute hosts (munge + slurmd), on one
bridge, with a directory shared by all three at the same path (the bundle and the logs).

Each host gets its own /etc/slurm and munge key in its overlay (tests/testhost_cluster.py skel);
nothing of this machine's /etc changes. The config is the smallest that behaves like a GPU
cluster for the sweeper: cons_tres with cores and memory as consumable resources, two fake GPUs
per node (gres/gpu over placeholder device files, so steps get CUDA_VISIBLE_DEVICES), no cgroups
(proctrack/linuxproc, task/none: the test hosts cannot delegate cgroup controllers), a node that
stops answering is DOWN 10 s later (SlurmdTimeout), and a finished job stays visible to
`scontrol show job` for an hour (MinJobAge) and is appended to a jobcomp/filetxt log: no slurmdbd,
so no `sacct` (see /work/notes/slurm.md for why).

`boot_slurm_cluster()` returns once `sinfo` shows both nodes idle; `shutdown_slurm_cluster` tears
it all down (bridge included). Tests skip with `skip_reason()` where not root or the packages are
missing (.ci/setup-system.sh installs them).
"""

from __future__ import annotations

import os
import pwd
import shlex
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import testhost_cluster, testhosts
from tests.testhost_cluster import Cluster
from tests.testhosts import TestHost

PARTITION = "gpu"
GPUS_PER_NODE = 2
CPUS_PER_NODE = 2
MEMORY_MB = 2000
#: Where the controller appends one line per finished job (jobcomp/filetxt).
JOBCOMP_LOG = "/var/log/slurm/jobcomp.log"
BINARIES = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sinfo")
READY_TIMEOUT_S = 60.0
#: slurmd always loads a cgroup plugin. "autodetect" picks cgroup/v2 (a test host mounts only
#: cgroup2), which dies on this machine's hybrid layout ("Hybrid mode is not supported": the
#: kernel lists its v1 hierarchies in /proc/self/cgroup). cgroup/v1 loads and, with
#: proctrack/linuxproc and task/none, is never asked to create a cgroup.
CGROUP_CONF = "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"
#: Accounting (opt-in): slurmdbd on the controller over MariaDB's unix socket.
SLURMDBD_CONF = """AuthType=auth/munge
DbdHost={controller}
SlurmUser=slurm
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StorageLoc=slurm_acct_db
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
"""
DB_GRANT_UNIT = "slurm-db-grant.service"
DB_GRANT_UNIT_TEXT = """[Unit]
Description=Slurm accounting database and its socket-authenticated user (test cluster)
After=mariadb.service
Requires=mariadb.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; \\
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED VIA unix_socket; \\
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
"""


@dataclass(frozen=True)
class SlurmCluster:
    """A booted Slurm: the test hosts, who is who, and how long it took to come up."""

    cluster: Cluster
    controller: TestHost  # also the login host: users reach the cluster through it over SSH
    nodes: tuple[TestHost, ...]
    boot_s: float

    @property
    def shared_dir(self) -> Path:
        """Same path on all three hosts and on this machine."""
        return self.cluster.shared_dir

    @property
    def gateway(self) -> str:
        """This machine's address on the cluster's bridge."""
        return f"10.200.{self.cluster.index}.1"

    @property
    def known_hosts(self) -> str:
        """A known_hosts file holding exactly the three hosts' keys."""
        return self.cluster.known_hosts

    def login_argv(self, command: list[str], *options: str) -> list[str]:
        """ssh to the login host (strict host keys) running `command` (one shell-quoted string
        per word, as OpenSSH joins them with spaces for the remote shell)."""
        argv = testhosts.ssh_argv(self.controller, command, *options)
        return [
            f"UserKnownHostsFile={self.known_hosts}" if a.startswith("UserKnownHostsFile=") else a
            for a in argv
        ]

    def login(self, command: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run one remote shell command line on the login host over SSH."""
        return subprocess.run(
            self.login_argv([command]), capture_output=True, text=True, timeout=timeout
        )

    def run(self, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run argv on the login host over SSH, every word quoted (as the sweeper sends it)."""
        return self.login(shlex.join(argv), timeout)


def skip_reason() -> str | None:
    """Why a Slurm cluster cannot be booted here, or None."""
    reason = testhosts.skip_reason()
    if reason:
        return reason
    missing = [path for path in BINARIES if not Path(path).exists()]
    if missing:
        return f"slurm tests need {', '.join(missing)} (run .ci/setup-system.sh)"
    for user in ("slurm", "munge"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            return f"slurm tests need the {user!r} user (run .ci/setup-system.sh)"
    return None


def accounting_skip_reason() -> str | None:
    """Why a cluster with slurmdbd (MariaDB on the controller) cannot be booted here, or None."""
    reason = skip_reason()
    if reason:
        return reason
    for path in ("/usr/sbin/slurmdbd", "/usr/sbin/mariadbd", "/usr/bin/mysql"):
        if not Path(path).exists():
            return f"slurm accounting tests need {path} (run .ci/setup-system.sh)"
    return None


def slurm_conf(controller: str, nodes: list[str], *, accounting: bool = False) -> str:
    """slurm.conf for one controller and `nodes` (why each line: module docstring, slurm.md).

    accounting: slurmdbd on the controller (so `sacct` answers) instead of none.
    """
    node_list = ",".join(nodes)
    storage = (
        [
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={controller}",
            "JobAcctGatherType=jobacct_gather/linux",
        ]
        if accounting
        else [
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
        ]
    )
    return "\n".join(
        [
            "ClusterName=sweepertest",
            f"SlurmctldHost={controller}",
            "AuthType=auth/munge",
            "SlurmUser=slurm",
            "StateSaveLocation=/var/lib/slurm/slurmctld",
            "SlurmdSpoolDir=/var/lib/slurm/slurmd",
            "SlurmctldPidFile=/run/slurmctld.pid",
            "SlurmdPidFile=/run/slurmd.pid",
            "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
            "SlurmdLogFile=/var/log/slurm/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            *storage,
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={JOBCOMP_LOG}",
            "MinJobAge=3600",
            "SlurmdTimeout=10",
            "ReturnToService=2",
            "KillWait=5",
            "MpiDefault=none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "GresTypes=gpu",
            f"NodeName={node_list} CPUs={CPUS_PER_NODE} RealMemory={MEMORY_MB}"
            f" Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={node_list} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def gres_conf() -> str:
    """Two GPUs per node over placeholder device nodes (no driver; Slurm only stats them)."""
    return f"Name=gpu File=/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n"


def boot_slurm_cluster(*, accounting: bool = False) -> SlurmCluster:
    """Controller + two computes on a fresh bridge; returns once both nodes are idle (and, with
    `accounting`, once slurmdbd answers `sacct`)."""
    t0 = time.monotonic()
    index = testhost_cluster.free_cluster_index()
    controller, nodes = f"sl{index}c", [f"sl{index}n1", f"sl{index}n2"]
    munge_key = os.urandom(1024)

    def prepare(name: str, skel: Path) -> tuple[str, ...]:
        _write(skel / "etc/slurm/slurm.conf", slurm_conf(controller, nodes, accounting=accounting))
        _write(skel / "etc/slurm/gres.conf", gres_conf())
        _write(skel / "etc/slurm/cgroup.conf", CGROUP_CONF)
        munge_dir = skel / "etc/munge"
        munge_dir.mkdir(mode=0o700)
        (munge_dir / "munge.key").write_bytes(munge_key)
        (munge_dir / "munge.key").chmod(0o400)
        munge = pwd.getpwnam("munge")
        for path in (munge_dir, munge_dir / "munge.key"):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        if name == controller and accounting:
            _accounting_skel(skel, controller)
            return ("munge.service", "mariadb.service", "slurmdbd.service", "slurmctld.service")
        if name == controller:
            return ("munge.service", "slurmctld.service")
        (skel / "dev").mkdir()
        for gpu in range(GPUS_PER_NODE):
            # gres/gpu wants real character devices (it reads their major:minor); NVIDIA's
            # numbers, in the host's private /dev tmpfs, with no driver behind them.
            os.mknod(skel / f"dev/nvidia{gpu}", 0o666 | stat.S_IFCHR, os.makedev(195, gpu))
        return ("munge.service", "slurmd.service")

    cluster = testhost_cluster.boot_cluster(index, [controller, *nodes], prepare)
    slurm = SlurmCluster(
        cluster=cluster,
        controller=cluster.host(controller),
        nodes=tuple(cluster.host(n) for n in nodes),
        boot_s=0.0,
    )
    try:
        _wait_until_idle(slurm, t0)
        if accounting:
            _wait_for_sacct(slurm, t0)
    except BaseException:
        testhost_cluster.shutdown_cluster(cluster)
        raise
    return SlurmCluster(cluster, slurm.controller, slurm.nodes, time.monotonic() - t0)


def shutdown_slurm_cluster(slurm: SlurmCluster) -> None:
    """Power all three hosts off; remove the bridge and the shared directory."""
    testhost_cluster.shutdown_cluster(slurm.cluster)


@contextmanager
def accounting_cluster() -> Iterator[SlurmCluster]:
    """A cluster with slurmdbd for one test alone (one that kills a host); skips with the reason
    where accounting cannot run here."""
    reason = accounting_skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = boot_slurm_cluster(accounting=True)
    try:
        yield cluster
    finally:
        shutdown_slurm_cluster(cluster)


def node_states(slurm: SlurmCluster) -> dict[str, str]:
    """{node: state} as `sinfo -N` reports it on the controller (e.g. "idle", "down*")."""
    out = slurm.controller.exec(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def _wait_until_idle(slurm: SlurmCluster, t0: float) -> None:
    want = {n.name: "idle" for n in slurm.nodes}
    states: dict[str, str] = {}
    while time.monotonic() - t0 < READY_TIMEOUT_S:
        states = node_states(slurm)
        if states == want:
            return
        time.sleep(0.2)
    logs = "\n".join(
        f"--- {h.name}:\n" + _tail(h.root / "var/log/slurm", 30)
        for h in (slurm.controller, *slurm.nodes)
    )
    raise RuntimeError(f"slurm nodes not idle after {READY_TIMEOUT_S:.0f} s: {states}\n{logs}")


def _accounting_skel(skel: Path, controller: str) -> None:
    """slurmdbd.conf (0600, owned by SlurmUser, as slurmdbd demands), the database and its
    socket-authenticated user created once MariaDB is up, and the start order."""
    conf = skel / "etc/slurm/slurmdbd.conf"
    _write(conf, SLURMDBD_CONF.format(controller=controller))
    conf.chmod(0o600)
    slurm = pwd.getpwnam("slurm")
    os.chown(conf, slurm.pw_uid, slurm.pw_gid)
    units = skel / "etc/systemd/system"
    _write(units / DB_GRANT_UNIT, DB_GRANT_UNIT_TEXT)
    wants = units / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    os.symlink(f"/etc/systemd/system/{DB_GRANT_UNIT}", wants / DB_GRANT_UNIT)
    order = f"[Unit]\nAfter={DB_GRANT_UNIT}\nRequires={DB_GRANT_UNIT}\n"
    _write(units / "slurmdbd.service.d/10-testcluster.conf", order)
    # slurmdbd (Type=simple) is "started" before it listens, and slurmctld without state files
    # dies when it cannot fetch the TRES list from it: try again a second later.
    _write(
        units / "slurmctld.service.d/10-testcluster.conf",
        "[Unit]\nAfter=slurmdbd.service\n[Service]\nRestart=on-failure\nRestartSec=1\n",
    )


def _wait_for_sacct(slurm: SlurmCluster, t0: float) -> None:
    while time.monotonic() - t0 < READY_TIMEOUT_S:
        sacct = slurm.controller.exec(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"])
        if sacct.returncode == 0 and "sweepertest" in sacct.stdout.split():
            return
        time.sleep(0.2)
    logs = _tail(slurm.controller.root / "var/log/slurm", 30)
    raise RuntimeError(f"slurmdbd has no cluster after {READY_TIMEOUT_S:.0f} s\n{logs}")


def _tail(log_dir: Path, lines: int) -> str:
    try:
        return "\n".join(
            f"{log.name}: " + "\n".join(log.read_text().splitlines()[-lines:])
            for log in sorted(log_dir.glob("*.log"))
        )
    except OSError as exc:
        return str(exc)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
