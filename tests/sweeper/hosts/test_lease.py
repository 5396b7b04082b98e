"""A host's lease (`sweeper.hosts.lease`) on this machine through `LocalHost`: the real `sh` and
`flock` swap, real processes as holders (one killed with SIGKILL), and eight takers racing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.hosts.lease import (
    Controller,
    LeaseBusy,
    LeaseDamaged,
    boot_id,
    lease_path,
    new_holder,
    read_lease,
    take,
)
from sweeper.hosts.local import LocalHost

#: A holder in its own process: takes the lease, says so, then waits to be killed.
HOLDER = """
import sys, time
from sweeper.hosts.lease import Controller, boot_id, new_holder, take
from sweeper.hosts.local import LocalHost
host, here = LocalHost(), Controller.here()
try:
    take(host, sys.argv[1], new_holder(sys.argv[2], here, boot_id(host)), here)
except Exception as exc:
    print("busy", exc, flush=True)
    sys.exit(3)
print("taken", flush=True)
if sys.argv[3] == "hold":
    time.sleep(600)
"""


def _holder(path: str, sweep: str, hold: bool = True) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, sweep, "hold" if hold else "go"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "taken"
    return proc


def test_a_live_holder_refuses_and_a_released_lease_is_free(tmp_path: Path) -> None:
    host, here = LocalHost(), Controller.here()
    path = lease_path(str(tmp_path))
    first = take(host, path, new_holder("alpha", here, boot_id(host)), here)
    first.update(run_id="20261204T000000000Z-aaaaaa", server={"pidfile": "/x/runtime.pid"})
    assert first.took_over is None
    with pytest.raises(LeaseBusy) as busy:
        take(host, path, new_holder("beta", here, boot_id(host)), here)
    message = str(busy.value)
    assert "sweep 'alpha' run 20261204T000000000Z-aaaaaa" in message
    assert f"pid {here.pid} on {here.hostname}" in message
    found = read_lease(host, path)
    assert found is not None and found[1] is not None
    assert found[1].server == {"pidfile": "/x/runtime.pid"}
    assert found[1].host_boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert first.release() is True
    assert read_lease(host, path) is None
    second = take(host, path, new_holder("beta", here, boot_id(host)), here)
    assert second.took_over is None and second.release()


def test_a_sigkilled_holder_is_taken_over_and_a_running_one_is_not(tmp_path: Path) -> None:
    host, here = LocalHost(), Controller.here()
    path = lease_path(str(tmp_path))
    holder = _holder(path, "alpha")
    try:
        with pytest.raises(LeaseBusy, match=f"sweep 'alpha' a run starting \\(pid {holder.pid} "):
            take(host, path, new_holder("beta", here, boot_id(host)), here)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    lease = take(host, path, new_holder("beta", here, boot_id(host)), here)
    assert lease.took_over is not None
    previous, why = lease.took_over
    assert previous.sweep == "alpha" and previous.pid == holder.pid
    assert why == f"its sweeper (pid {holder.pid}) is gone"
    assert lease.release()


def test_another_boot_frees_the_lease_and_another_controller_holds_it(tmp_path: Path) -> None:
    host, here = LocalHost(), Controller.here()
    path = lease_path(str(tmp_path))
    lease = take(host, path, new_holder("alpha", here, boot_id(host)), here)
    text = Path(path).read_text()
    # The same holder as if taken before this host's last boot: gone, whatever its pid.
    Path(path).write_text(json.dumps({**json.loads(text), "host_boot_id": "0" * 32}))
    after = take(host, path, new_holder("beta", here, boot_id(host)), here)
    assert after.took_over is not None
    assert after.took_over[1] == "the host has booted since it was taken"
    assert lease.release() is False  # no longer ours: left to its new holder
    assert read_lease(host, path) is not None
    # A holder on another controller cannot be checked from here: it holds.
    other = json.loads(Path(path).read_text()) | {"controller": "elsewhere", "pid": 1}
    Path(path).write_text(json.dumps(other, sort_keys=True))
    with pytest.raises(LeaseBusy, match="another controller, so it cannot be checked"):
        take(host, path, new_holder("gamma", here, boot_id(host)), here)


def test_racing_takers_never_both_win(tmp_path: Path) -> None:
    """Eight processes take one free lease at once, three times: exactly one wins each time
    (the winner holds on, so no loser can find it gone and take it over)."""
    for round_ in range(3):
        path = lease_path(str(tmp_path / f"r{round_}"))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", HOLDER, path, f"s{i}", "hold"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        try:
            said = [p.stdout.readline().strip() for p in procs if p.stdout is not None]
        finally:
            for proc in procs:
                proc.kill()
                proc.wait(timeout=10)
        assert sum(s == "taken" for s in said) == 1, said
        assert all(s == "taken" or s.startswith("busy") for s in said), said
        winner = said.index("taken")
        found = read_lease(LocalHost(), path)
        assert found is not None and found[1] is not None and found[1].sweep == f"s{winner}"


@pytest.mark.root
def test_a_live_holder_in_another_pid_namespace_is_never_taken_over(tmp_path: Path) -> None:
    """A real holder in its own PID namespace (`unshare`, as a container runs it): its pid 1
    names another process here, so its liveness cannot be checked: refused, never taken."""
    if os.geteuid() != 0:
        pytest.skip("needs root to unshare a PID namespace (CI runs as root)")
    host, here = LocalHost(), Controller.here()
    path = lease_path(str(tmp_path))
    unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
    holder = subprocess.Popen(
        [*unshare, sys.executable, "-c", HOLDER, path, "alpha", "hold"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "taken"
        found = read_lease(host, path)
        assert found is not None and found[1].pid == 1
        refused = r"in another PID namespace \(pid:\[\d+\]; .*\), so it cannot be checked"
        with pytest.raises(LeaseBusy, match=refused):
            take(host, path, new_holder("beta", here, boot_id(host)), here)
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_a_failed_swap_leaves_no_staged_lease(tmp_path: Path) -> None:
    """The swap cannot take its guard (a directory in its place): the taker stops naming the
    lease, and the new holder it staged beside it is gone too."""
    host, here = LocalHost(), Controller.here()
    path = lease_path(str(tmp_path))
    Path(f"{path}.guard").mkdir(parents=True)
    with pytest.raises(LeaseDamaged, match="cannot be swapped"):
        take(host, path, new_holder("alpha", here, boot_id(host)), here)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lease.json.guard"]
