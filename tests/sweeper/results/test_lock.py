"""The run lock across real processes: an overlap is refused, a dead holder's lock recovered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.results.lock import LockBusy, run_lock

HOLD = """
import sys, time
from pathlib import Path
from sweeper.results.lock import run_lock
with run_lock(Path(sys.argv[1])) as held:
    print("held", held.recovered_from, flush=True)
    time.sleep(60)
"""
TRY = """
import sys
from pathlib import Path
from sweeper.results.lock import LockBusy, run_lock
try:
    with run_lock(Path(sys.argv[1])) as held:
        print("got", held.recovered_from)
except LockBusy as busy:
    print("busy", busy.pid)
"""


def _holder(lock: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("held")
    return proc


def _try(lock: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", TRY, str(lock)], capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip()


def test_overlapping_holder_is_refused_then_a_dead_holders_lock_is_recovered(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "nightly.lock"
    holder = _holder(lock)
    try:
        assert _try(lock) == f"busy {holder.pid}"
        with pytest.raises(LockBusy, match=f"pid {holder.pid}"), run_lock(lock):
            pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # dies without releasing anything itself
        holder.wait()
    assert lock.read_text().strip() == str(holder.pid)  # the dead run left its pid behind
    assert _try(lock) == f"got {holder.pid}"


def test_clean_release_leaves_nothing_to_recover(tmp_path: Path) -> None:
    lock = tmp_path / "sub" / "nightly.lock"
    with run_lock(lock) as held:
        assert held.recovered_from is None
        assert lock.read_text().strip() == str(os.getpid())
    assert lock.read_text() == ""
    with run_lock(lock) as held:
        assert held.recovered_from is None
