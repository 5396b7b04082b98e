"""Host load on the real local machine: CPU burnt by processes outside the sweep's tree is
seen as other processes' CPU (and the point is busy), the same burn inside the sweep's own tree
is not; a short measurement shaped like a point (a server in its own session with a child,
forked client workers that exit before the second reading) is quiet on its own and busy with
two busy-loop processes beside it (on a machine busy without it, only that none of the
sweep's own CPU is the others'; the workers' own CPU is checked exactly either way); GPU
readings parsed from nvidia-smi's CSV."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from sweeper.hosts.local import LocalHost
from sweeper.measure.hostload import (
    BUSY_CORES,
    HostProbe,
    Snapshot,
    load_columns,
    read_snapshot,
)

# quiet: it reads this machine's load; beside the suite's other lane its quiet-machine checks
# would not run (tests/lanes.py).
pytestmark = pytest.mark.quiet

HOG = "import time\nend = time.time() + 3\nwhile time.time() < end: pass"
BURN = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass"
# A server burning CPU itself and in a child it started (as an engine's worker processes).
SERVER = (
    "import subprocess, sys\n"
    f"child = subprocess.Popen([sys.executable, '-c', {BURN.format(s=4)!r}])\n"
    + BURN.format(s=4)
    + "\nchild.wait()"
)
# Starts a hog in its own session and leaves it (reparented away): a process of someone else.
STRANGER = (
    "import subprocess, sys\n"
    f"p = subprocess.Popen([sys.executable, '-c', {BURN.format(s=20)!r}],\n"
    "    start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(p.pid)"
)


def test_a_cpu_hog_outside_the_sweep_makes_the_host_busy() -> None:
    host = LocalHost()
    before = read_snapshot(host)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(2)]
    time.sleep(1.5)
    after = read_snapshot(host)
    for hog in hogs:
        hog.kill()
        hog.wait()
    others = load_columns(before, after, ours=[])
    assert others["host_busy"] is True and others["host_other_cpu"] >= 0.7
    assert "other processes used" in others["host_busy_reason"]
    # The same hogs as children of the controller are the sweep's own: exactly their CPU time
    # leaves the others' share (whatever else this machine is running meanwhile).
    assert before is not None and after is not None
    span = (after.total_ticks - before.total_ticks) / after.cpus
    hog_cores = sum(after.procs[h.pid][1] for h in hogs if h.pid in after.procs) / span
    ours = load_columns(before, after, ours=[os.getpid()])
    assert hog_cores > 0.1
    assert abs(others["host_other_cpu"] - ours["host_other_cpu"] - hog_cores) < 0.1


def test_snapshot_parses_proc_and_gpus() -> None:
    text = "\n".join(
        [
            "cpu  100 0 50 800 50 7 3 0 0 0",
            "self 77",
            "cpus 2",
            "tck 100",
            "procs",
            "10 (py thon) S 1 10 10 0 -1 0 0 0 0 0 40 5 0 0",
            "11 (child)) R 10 10 10 0 -1 0 0 0 0 0 7 1 2 1",
            "gpus",
            "35, 1024",
            "80, 2048",
            "apps",
            "11",
            "999",
        ]
    )
    snap = Snapshot.parse(text)
    # interrupt time (7 + 3) is charged to no process: not busy; the reaped child's 3 ticks are
    assert (snap.busy_ticks, snap.total_ticks, snap.cpus, snap.reader) == (150, 1010, 2, 77)
    assert snap.procs == {10: (1, 45), 11: (10, 11)} and snap.sessions == {10: 10, 11: 10}
    assert snap.gpu_util == (35.0, 80.0) and snap.gpu_pids == (11, 999)
    later = Snapshot(
        snap.busy_ticks + 100, snap.total_ticks + 200, 2, snap.procs, (90.0,), (3.0,), (11, 999)
    )
    columns = load_columns(snap, later, ours=[10])
    assert columns["gpu_util"] == 90.0 and columns["host_busy"] is True
    assert "1 other process(es) on the GPU" in columns["host_busy_reason"]


def _burn(seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        pass


def _point(host: LocalHost) -> dict[str, Any]:
    """A short point as the runner measures one: the probe around a server (own session) and
    two client workers forked from a forkserver that exit before the second reading."""
    server = subprocess.Popen([sys.executable, "-c", SERVER], start_new_session=True)
    try:
        time.sleep(0.3)  # the server and its child are up
        probe = HostProbe(host, server.pid)
        probe.start()
        ctx = mp.get_context("forkserver")
        workers = [ctx.Process(target=_burn, args=(1.2,)) for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        time.sleep(0.5)  # the server still burns: its tree is read alive
        return probe.columns()
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@contextmanager
def _strangers(n: int) -> Iterator[None]:
    """`n` busy loops outside the sweep's tree and session (started, then orphaned)."""
    pids = [
        int(subprocess.run([sys.executable, "-c", STRANGER], capture_output=True).stdout)
        for _ in range(n)
    ]
    try:
        time.sleep(0.3)
        yield
    finally:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _ambient(host: LocalHost, seconds: float) -> float:
    """Other processes' CPU on this machine with nothing of ours running."""
    before = read_snapshot(host)
    time.sleep(seconds)
    return float(load_columns(before, read_snapshot(host), ours=[]).get("host_other_cpu", 0.0))


def test_a_quiet_point_is_not_busy_though_the_sweep_itself_burns_cpu() -> None:
    host = LocalHost()
    # A neighbour's burst (another test's server shutting down) passes: the quietest of a few
    # seconds' readings is this machine's own background.
    ambient = _ambient(host, 1.0)
    for _ in range(7):
        if ambient < BUSY_CORES / 4:
            break
        ambient = min(ambient, _ambient(host, 1.0))
    columns = _point(host)
    # The server, its child and both exited workers burnt well over a core between the
    # readings; none of it is the others'. Checked on any machine, busy or not.
    assert columns["host_other_cpu"] < ambient + 0.3, (columns, ambient)
    if ambient < BUSY_CORES / 2:  # a quiet machine (CI's): then the point is not busy either
        assert columns["host_busy"] is False, columns


def test_two_busy_loops_beside_a_point_make_it_busy() -> None:
    host = LocalHost()
    with _strangers(2):
        columns = _point(host)
    assert columns["host_busy"] is True
    assert columns["host_other_cpu"] >= BUSY_CORES
    assert "other processes used" in columns["host_busy_reason"]


def test_a_reaped_child_counts_as_its_parent_s_and_only_after_the_first_reading() -> None:
    """Worker 11 of our tree ran 30 ticks before the first reading and exited (reaped by 10)
    after 50 more: 50 ticks are ours, the rest of the busy time is the others'."""
    before = Snapshot(1000, 4000, 2, {10: (1, 100), 11: (10, 30), 20: (1, 0)}, reader=30)
    after = Snapshot(1200, 4400, 2, {10: (1, 100 + 80), 20: (1, 100), 31: (10, 2)}, reader=31)
    columns = load_columns(before, after, ours=[10])
    # busy 200 ticks over 200 per CPU; ours: 10 grew by 80 (the child's 30 + 50), minus its
    # 30 before, plus the reader's 2 -> 52; others 148 / 200 = 0.74 cores.
    assert columns["host_other_cpu"] == pytest.approx(0.74)


def test_a_process_of_the_server_s_session_is_ours_even_when_reparented() -> None:
    before = Snapshot(0, 1000, 2, {5: (1, 0), 6: (1, 0)}, sessions={5: 5, 6: 5})
    after = Snapshot(300, 1600, 2, {5: (1, 100), 6: (1, 200)}, sessions={5: 5, 6: 5})
    assert load_columns(before, after, ours=[5])["host_other_cpu"] == 0.0
    assert load_columns(before, after, ours=[])["host_other_cpu"] == 1.0


def _burn_and_tell(seconds: float, results: Any) -> None:
    _burn(seconds)
    results.put(time.process_time())


def test_client_workers_that_exited_before_the_second_reading_count_as_ours() -> None:
    """However busy this machine is: the CPU of forked workers that ran and were reaped between
    the readings leaves the others' share (it was the others' before, a quiet run read busy)."""
    host = LocalHost()
    ctx = mp.get_context("forkserver")
    results = ctx.Queue()
    warm = ctx.Process(target=_burn, args=(0.0,))  # the forkserver starts outside the window
    warm.start()
    warm.join()
    probe = HostProbe(host, None)
    probe.start()
    workers = [ctx.Process(target=_burn_and_tell, args=(1.0, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    used_s = sum(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join()
    before, after = probe.before, read_snapshot(host)
    assert before is not None and after is not None
    span_s = (after.total_ticks - before.total_ticks) / after.cpus / os.sysconf("SC_CLK_TCK")
    everyone = load_columns(before, after, ours=[])["host_other_cpu"]
    others = load_columns(before, after, ours=probe.roots)["host_other_cpu"]
    assert everyone - others >= used_s / span_s - 0.05
