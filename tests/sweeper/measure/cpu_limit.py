"""A CPU-limited cgroup for tests (root only): cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`.

Both set the same CFS bandwidth limit (quota per period). v2 is used where the cgroup2 mount
offers the cpu controller; hybrid machines (like this one: cgroup2 at /sys/fs/cgroup/unified
with no controllers, cpu on v1) get the v1 cpu hierarchy instead. Mounts are read from
/proc/self/mountinfo, as tests/testhosts.py finds the cgroup2 mount.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def _mounts() -> list[tuple[str, Path, str]]:
    """(fstype, mount point, super options) of every cgroup mount."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[sep + 3]
        if fstype in ("cgroup", "cgroup2"):
            out.append((fstype, Path(fields[4]), options))
    return out


def _words(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def cpu_cgroup_root() -> tuple[str, Path] | None:
    """("v2", root) where cgroup2 has the cpu controller, else ("v1", cpu mount), else None."""
    for fstype, mount, _ in _mounts():
        controllers = mount / "cgroup.controllers"
        if fstype == "cgroup2" and "cpu" in _words(controllers):
            return "v2", mount
    for fstype, mount, options in _mounts():
        if fstype == "cgroup" and "cpu" in options.split(","):
            return "v1", mount
    return None


def why_no_cpu_limit() -> str | None:
    """Why this machine cannot run the CPU-starvation test, or None when it can."""
    if os.geteuid() != 0:
        return "limiting a client's CPU needs root (a cgroup cpu.max); CI runs as root"
    if cpu_cgroup_root() is None:
        return "no cgroup hierarchy with the cpu controller (neither v2 cpu.max nor v1 cfs quota)"
    return None


@contextlib.contextmanager
def cpu_limited(name: str) -> Iterator[tuple[Path, Callable[[float | None], None]]]:
    """A fresh cgroup; yields (its procs file, set_quota(share) to apply or lift the limit).

    `set_quota(0.05)` allows 5% of one core (5 ms per 100 ms period); `set_quota(None)` lifts it.
    Processes put in the procs file (and their children) are limited. The group has the highest
    CPU weight, so without a quota it is not starved by the rest of the machine. It is removed on
    exit once its processes have gone.
    """
    found = cpu_cgroup_root()
    assert found is not None, why_no_cpu_limit()
    kind, root = found
    if kind == "v2":
        subtree = root / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            subtree.write_text("+cpu")
    group = root / f"{name}-{os.getpid()}"
    group.mkdir()
    # The most weight a group can have: the machine's other load (a busy 2-core box) must not
    # starve the group, so that the quota is the only thing that does.
    if kind == "v2":
        (group / "cpu.weight").write_text("10000")
    else:
        (group / "cpu.shares").write_text("262144")
    period_us = 100_000

    def set_quota(share: float | None) -> None:
        if kind == "v2":
            quota = "max" if share is None else str(int(share * period_us))
            (group / "cpu.max").write_text(f"{quota} {period_us}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(period_us))
            quota = "-1" if share is None else str(int(share * period_us))
            (group / "cpu.cfs_quota_us").write_text(quota)

    try:
        yield group / "cgroup.procs", set_quota
    finally:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                group.rmdir()
                break
            except OSError:  # its processes are still exiting
                time.sleep(0.1)
