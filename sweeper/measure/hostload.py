"""How busy the host was during a point, apart from the sweep itself.

A speedup divides two measurements taken minutes apart; on a shared machine they see different
load, and a busy host can make either side slow. So around each point's measured requests the
host is read twice through its connection (`/proc/stat`, every process's CPU time, and on a GPU
host `nvidia-smi`): the CPU other processes used (in cores, averaged over the point) is the
whole machine's busy time minus the sweep's own processes (the server's tree, and on the local
host the controller's tree with its load-client processes). A point is `host_busy` when others
used at least `BUSY_CORES` cores (or a quarter of the CPUs, whichever is more), or when another
process held the GPU. Its numbers are kept, marked; `sweeper best` withholds a speedup measured
on a busy host (either side of the ratio).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.hosts import Host, HostError

#: Cores of other processes' CPU that make a host busy (at least; a quarter of its CPUs if more).
BUSY_CORES = 0.5
_SCRIPT = (
    "head -n 1 /proc/stat; echo cpus $(nproc); echo tck $(getconf CLK_TCK); "
    "echo procs; cat /proc/[0-9]*/stat 2>/dev/null; echo gpus; "
    "nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits "
    "2>/dev/null; echo apps; "
    "nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null; true"
)


@dataclass(frozen=True)
class Snapshot:
    """One reading of the host."""

    busy_ticks: int
    total_ticks: int
    cpus: int
    #: pid -> (parent pid, CPU ticks used so far)
    procs: Mapping[int, tuple[int, int]]
    gpu_util: tuple[float, ...] = ()
    gpu_mem_mib: tuple[float, ...] = ()
    gpu_pids: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        lines = text.splitlines()
        fields = [int(v) for v in lines[0].split()[1:9]]  # guest time is already in user
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        cpus = int(lines[1].split()[1])
        procs: dict[int, tuple[int, int]] = {}
        section, gpus, apps = "", [], []
        for line in lines[3:]:
            if line in ("procs", "gpus", "apps"):
                section = line
            elif section == "procs":
                head, _, rest = line.rpartition(")")
                values = rest.split()
                if head and len(values) > 12:  # state ppid ... utime(12) stime(13) after ')'
                    pid = int(head.split(" (", 1)[0])
                    procs[pid] = (int(values[1]), int(values[11]) + int(values[12]))
            elif section == "gpus" and "," in line:
                gpus.append(tuple(float(v) for v in line.split(",")[:2]))
            elif section == "apps" and line.strip().isdigit():
                apps.append(int(line.strip()))
        return cls(
            sum(fields) - idle,
            sum(fields),
            cpus,
            procs,
            tuple(g[0] for g in gpus),
            tuple(g[1] for g in gpus),
            tuple(apps),
        )


def read_snapshot(host: Host) -> Snapshot | None:
    """The host now, or None when it cannot be read (the point is then simply not judged)."""
    try:
        result = host.run(["sh", "-c", _SCRIPT], timeout=20, check=True)
        return Snapshot.parse(result.stdout)
    except (HostError, ValueError, IndexError):
        return None


def tree(procs: Mapping[int, tuple[int, int]], roots: Iterable[int]) -> set[int]:
    """The roots and every descendant among `procs`."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [r for r in roots if r in procs]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def load_columns(
    before: Snapshot | None, after: Snapshot | None, ours: Iterable[int]
) -> dict[str, Any]:
    """The point's host-load columns from two snapshots; `ours` are the sweep's root pids."""
    if before is None or after is None or after.total_ticks <= before.total_ticks:
        return {}
    roots = list(ours)
    mine = tree(after.procs, roots) | tree(before.procs, roots)
    # Per-CPU ticks: the whole interval is total / cpus ticks long on each CPU.
    span = (after.total_ticks - before.total_ticks) / max(after.cpus, 1)
    busy = after.busy_ticks - before.busy_ticks
    own = sum(
        after.procs[p][1] - before.procs.get(p, (0, 0))[1]
        for p in mine
        if p in after.procs and after.procs[p][1] >= before.procs.get(p, (0, 0))[1]
    )
    other = max(0.0, (busy - own) / span) if span > 0 else 0.0
    gpu_others = [p for p in after.gpu_pids if p not in mine]
    threshold = max(BUSY_CORES, 0.25 * after.cpus)
    reasons = []
    if other >= threshold:
        reasons.append(f"other processes used {other:.2f} of {after.cpus} CPUs")
    if gpu_others:
        reasons.append(f"{len(gpu_others)} other process(es) on the GPU")
    columns: dict[str, Any] = {
        "host_other_cpu": round(other, 3),
        "host_cpus": after.cpus,
        "host_busy": bool(reasons),
        "host_busy_reason": "; ".join(reasons),
    }
    if after.gpu_util:
        columns["gpu_util"] = max(after.gpu_util)
        columns["gpu_mem_mib"] = max(after.gpu_mem_mib)
    return columns


def sweep_roots(server_pid: int | None, local: bool) -> list[int]:
    """The sweep's own root processes on the host: the server, and on the local host the
    controller (whose tree holds the load client)."""
    roots = [server_pid] if server_pid else []
    return [*roots, os.getpid()] if local else roots


class HostProbe:
    """Reads a host when a point's measured requests start and end (`start`, then `columns`)."""

    def __init__(self, host: Host, server_pid: int | None) -> None:
        from sweeper.hosts.local import LocalHost

        self.host = host
        self.roots = sweep_roots(server_pid, isinstance(host, LocalHost))
        self.before: Snapshot | None = None

    def start(self) -> None:
        self.before = read_snapshot(self.host)

    def columns(self) -> dict[str, Any]:
        return load_columns(self.before, read_snapshot(self.host), self.roots)
