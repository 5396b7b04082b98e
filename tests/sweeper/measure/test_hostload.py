"""Host load on the real local machine: CPU burnt by processes outside the sweep's tree is
seen as other processes' CPU (and the point is busy), the same burn inside the sweep's own tree
is not; GPU readings parsed from nvidia-smi's CSV."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from sweeper.hosts.local import LocalHost
from sweeper.measure.hostload import Snapshot, load_columns, read_snapshot

HOG = "import time\nend = time.time() + 3\nwhile time.time() < end: pass"


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
            "cpu  100 0 50 800 50 0 0 0 0 0",
            "cpus 2",
            "tck 100",
            "procs",
            "10 (py thon) S 1 10 10 0 -1 0 0 0 0 0 40 5 0 0",
            "11 (child)) R 10 10 10 0 -1 0 0 0 0 0 7 1 0 0",
            "gpus",
            "35, 1024",
            "80, 2048",
            "apps",
            "11",
            "999",
        ]
    )
    snap = Snapshot.parse(text)
    assert (snap.busy_ticks, snap.total_ticks, snap.cpus) == (150, 1000, 2)
    assert snap.procs == {10: (1, 45), 11: (10, 8)}
    assert snap.gpu_util == (35.0, 80.0) and snap.gpu_pids == (11, 999)
    later = Snapshot(
        snap.busy_ticks + 100, snap.total_ticks + 200, 2, snap.procs, (90.0,), (3.0,), (11, 999)
    )
    columns = load_columns(snap, later, ours=[10])
    assert columns["gpu_util"] == 90.0 and columns["host_busy"] is True
    assert "1 other process(es) on the GPU" in columns["host_busy_reason"]
