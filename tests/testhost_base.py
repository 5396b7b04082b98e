"""What the test host modules share: paths, the units and capabilities a host loses, the options a
host boots with (as written to its work directory for the namespace stages), and small process,
cgroup and waiting helpers. No side effects on import.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

BASE = Path(os.environ.get("SWEEPER_TESTHOST_BASE", "/tmp/sweeper-testhosts"))
PROJECT_DIR = Path(__file__).resolve().parents[1]
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UPPER_SIZE = "4g"
CGROUP_PARENT = "sweeper-testhost"
#: Units of the shared image that a test host must not run (they come from this machine's /etc).
#: munge/slurm units are here because installing Slurm here (.ci/setup-system.sh) enables them in
#: this machine's /etc; a slurm cluster host enables only those of its role (HostOptions.units).
MASK_UNITS = (
    "postgresql.service",
    "getty@.service",
    "console-getty.service",
    "serial-getty@.service",
    "systemd-timesyncd.service",
    "e2scrub_reap.service",
    "systemd-pstore.service",
    "cron.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "man-db.timer",
    "systemd-tmpfiles-clean.timer",
    "dev-hugepages.mount",
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
    "sys-kernel-config.mount",
    "sys-fs-fuse-connections.mount",
    "proc-sys-fs-binfmt_misc.automount",
    "systemd-binfmt.service",
    "systemd-modules-load.service",
    "kmod-static-nodes.service",
    "munge.service",
    "slurmctld.service",
    "slurmd.service",
    "slurmdbd.service",
    "mariadb.service",
)
#: Capabilities the booted systemd and everything below it lose (see tests/testhosts.py).
DROP_CAPS = "-sys_module,-sys_time,-sys_rawio,-syslog,-wake_alarm,-block_suspend,-audit_read"


@dataclass(frozen=True)
class HostOptions:
    """How a host differs from the default one (own veth + subnet, only sshd enabled).

    bridge: attach the host's eth0 to this bridge (made by testhost_net.bridge_up) with `address`
    instead of giving it its own veth subnet. etc_hosts: (address, name) lines for /etc/hosts.
    shared_dirs: directories of this machine bind-mounted read-write at the same path inside.
    skel: a directory tree copied over the host's root (`cp -a`: modes and owners kept) before
    systemd starts. units: units unmasked (if in MASK_UNITS) and wanted by multi-user.target.
    """

    bridge: str | None = None
    address: str | None = None
    etc_hosts: tuple[tuple[str, str], ...] = ()
    shared_dirs: tuple[str, ...] = ()
    skel: str | None = None
    units: tuple[str, ...] = field(default=())

    def write(self, work: Path) -> None:
        """Store the options for the namespace stages (they run as a separate process)."""
        (work / "options.json").write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, work: Path) -> HostOptions:
        """The options `write` stored (defaults when none were)."""
        try:
            raw = json.loads((work / "options.json").read_text())
        except FileNotFoundError:
            return cls()
        return cls(
            bridge=raw["bridge"],
            address=raw["address"],
            etc_hosts=tuple((address, name) for address, name in raw["etc_hosts"]),
            shared_dirs=tuple(raw["shared_dirs"]),
            skel=raw["skel"],
            units=tuple(raw["units"]),
        )


def netns_name(name: str) -> str:
    """The network namespace of host `name` (also its veth's name on this machine)."""
    return f"sw-{name}"


def cgroup2_root() -> Path | None:
    """Where this machine's cgroup2 hierarchy is mounted (pure or hybrid), or None."""
    for candidate in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        kind = subprocess.run(
            ["stat", "-fc", "%T", str(candidate)], capture_output=True, text=True, check=False
        ).stdout.strip()
        if kind == "cgroup2fs":
            return candidate
    return None


def host_cgroup(name: str) -> Path | None:
    """The cgroup holding everything of host `name`."""
    root = cgroup2_root()
    return None if root is None else root / CGROUP_PARENT / name


def pid_alive(pid_file: Path) -> bool:
    """The pid file holds "PID STARTTIME UNSHARE_PID"; true if that exact process still runs."""
    try:
        pid, start, _ = pid_file.read_text().split()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return False
    return fields[0] != "Z" and fields[19] == start  # state, starttime (fields 3 and 22)


def process_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def send_signal(pid: int, sig: int) -> None:
    """kill(2), ignoring a process that is already gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def rmdir_tree(path: Path) -> bool:
    """Remove an (empty) cgroup directory tree bottom-up; True when it is gone."""
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            sub.rmdir()
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def wait(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    """Poll `predicate` until it is true (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def check(argv: list[str], cwd: Path | None = None) -> None:
    """Run argv; raise with its stderr when it fails."""
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def force_symlink(target: str, link: Path) -> None:
    """ln -sfn."""
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(target, link)
