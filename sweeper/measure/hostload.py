"""How busy the host was during a point, apart from the sweep itself.

A speedup divides two measurements taken minutes apart; on a shared machine they see different
load, and a busy host can make either side slow. So around each point's measured requests the
host is read twice through its connection (`/proc/stat`, every process's CPU time, and on a GPU
host `nvidia-smi`): the CPU other processes used (in cores, averaged over the point) is the
machine's busy time minus the sweep's own. The sweep's own is every process in the trees of its
roots (the server's process group leader, the probe's own shell, and on the local host the
controller with its load-client workers), counting the CPU of children they already reaped: the
client's forked workers exit before the point's second reading, and without their reaped time
a quiet run read as busy. Busy time is user + nice + system + steal (a neighbour VM on our CPUs
is load too); interrupt time is left out, as no process is charged for it and on a quiet host it
is mostly the sweep's own loopback traffic between client and server.

A point is `host_busy` when others used at least `BUSY_CORES` cores (or a quarter of the CPUs,
whichever is more), or when another process held the GPU. Why these: the readings are sampled
at the kernel's clock tick, so over a point of a few seconds the others' share carries an error
of a few hundredths of a core, and a quiet machine's daemons use about as much; half a core is
ten times that, yet one busy-loop beside the sweep (a whole core) is always seen. On a large
host a quarter of its CPUs keeps a few busy system threads from flagging every point. Its numbers
are kept, marked; `sweeper best` withholds a speedup measured on a busy host (either side of the
ratio).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sweeper.hosts import Host, HostError

#: Cores of other processes' CPU that make a host busy (at least; a quarter of its CPUs if more).
BUSY_CORES = 0.5
_SCRIPT = (
    "head -n 1 /proc/stat; echo self $$; echo cpus $(nproc); echo tck $(getconf CLK_TCK); "
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
    #: pid -> (parent pid, CPU ticks used so far by it and by the children it reaped)
    procs: Mapping[int, tuple[int, int]]
    gpu_util: tuple[float, ...] = ()
    gpu_mem_mib: tuple[float, ...] = ()
    gpu_pids: tuple[int, ...] = ()
    #: The shell that took the reading (its `cat` is the sweep's own work).
    reader: int | None = None
    #: pid -> session id: the server leads its own session (and process group), so whatever
    #: it starts stays ours even when reparented away from its tree.
    sessions: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        lines = text.splitlines()
        fields = [int(v) for v in lines[0].split()[1:9]]  # guest time is already in user
        fields += [0] * (8 - len(fields))
        # user nice system idle iowait irq softirq steal: busy is user + nice + system + steal
        busy = fields[0] + fields[1] + fields[2] + fields[7]
        header = lines[1 : lines.index("procs")] if "procs" in lines else lines[1:]
        readings = dict(line.split(" ", 1) for line in header if " " in line)
        cpus = int(readings["cpus"])
        reader = int(readings["self"]) if readings.get("self", "").isdigit() else None
        procs: dict[int, tuple[int, int]] = {}
        sessions: dict[int, int] = {}
        section, gpus, apps = "", [], []
        for line in lines[1:]:
            if line in ("procs", "gpus", "apps"):
                section = line
            elif section == "procs":
                head, _, rest = line.rpartition(")")
                values = rest.split()
                # after ')': state ppid ... utime(11) stime(12) cutime(13) cstime(14)
                if head and len(values) > 12:
                    pid = int(head.split(" (", 1)[0])
                    procs[pid] = (int(values[1]), sum(int(v) for v in values[11:15]))
                    sessions[pid] = int(values[3])
            elif section == "gpus" and "," in line:
                gpus.append(tuple(float(v) for v in line.split(",")[:2]))
            elif section == "apps" and line.strip().isdigit():
                apps.append(int(line.strip()))
        return cls(
            busy,
            sum(fields),
            cpus,
            procs,
            tuple(g[0] for g in gpus),
            tuple(g[1] for g in gpus),
            tuple(apps),
            reader,
            sessions,
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
    roots = [*ours, *(s.reader for s in (before, after) if s.reader is not None)]
    led = [p for s in (before, after) for p, sid in s.sessions.items() if sid in roots]
    mine = tree(after.procs, [*roots, *led]) | tree(before.procs, [*roots, *led])
    # Per-CPU ticks: the whole interval is total / cpus ticks long on each CPU.
    span = (after.total_ticks - before.total_ticks) / max(after.cpus, 1)
    busy = after.busy_ticks - before.busy_ticks
    own = 0
    for pid in mine:
        was = before.procs.get(pid, (0, 0))[1]
        if pid in after.procs and after.procs[pid][1] >= was:
            own += after.procs[pid][1] - was
        elif pid not in after.procs and before.procs[pid][0] in mine:
            # Exited: its parent in the tree now carries all its time as reaped children's,
            # of which only what it used after the first reading belongs to this interval.
            own -= was
    own = max(own, 0)
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
    """The sweep's own root processes on the host: the server (with its session), and on the
    local host the controller (whose tree holds the load client's forkserver and workers)."""
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
