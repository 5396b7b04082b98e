"""ProcessService against real child processes: start, state, logs, stop, port handling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.engines.launch import Launch
from sweeper.services import ServiceError
from sweeper.services.local_process import ProcessService, port_in_use, wait_port_free
from tests.sweeper.conftest import fake_argv

pytestmark = pytest.mark.slow


def _wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not port_in_use(port):
        assert time.monotonic() < deadline, "fake runtime never listened"
        time.sleep(0.05)


def test_start_stop_frees_port_and_group(tmp_path: Path, port: int) -> None:
    svc = ProcessService(tmp_path)
    inst = svc.start(Launch(argv=fake_argv(port, "a"), port=port, launch_id="a"))
    _wait_listening(port)
    assert svc.state().running and inst.pid
    assert svc.pidfile.exists()
    svc.stop(timeout=5)
    assert svc.state().exited
    assert not port_in_use(port)
    with pytest.raises(ProcessLookupError):
        os.killpg(inst.pid, 0)
    assert not svc.pidfile.exists()
    text, cursor = svc.logs(None)
    assert "listening" in text and int(cursor) == len(text.encode())


def test_crash_reports_exit_code_and_log(tmp_path: Path, port: int) -> None:
    svc = ProcessService(tmp_path)
    launch = Launch(argv=fake_argv(port, "c"), port=port, launch_id="c", env={"FAKE_CRASH": "7"})
    svc.start(launch)
    deadline = time.monotonic() + 10
    while not svc.state().exited:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert svc.state().exit_code == 7
    assert "injected start failure" in svc.logs()[0]


def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path, port: int) -> None:
    code = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    svc = ProcessService(tmp_path)
    svc.start(Launch(argv=(sys.executable, "-c", code), port=port, launch_id="k"))
    time.sleep(0.3)
    t0 = time.monotonic()
    svc.stop(timeout=1.0)
    assert svc.state().exit_code == -signal.SIGKILL
    assert time.monotonic() - t0 < 5


def test_busy_port_refuses_to_start(tmp_path: Path, port: int) -> None:
    other = subprocess.Popen(fake_argv(port, "other"), start_new_session=True)
    try:
        _wait_listening(port)
        svc = ProcessService(tmp_path, port_wait_s=0.5)
        with pytest.raises(ServiceError, match="still in use"):
            svc.start(Launch(argv=fake_argv(port, "new"), port=port, launch_id="new"))
    finally:
        other.terminate()
        other.wait(10)
    assert wait_port_free(port, 5)


def test_reap_stale_instance_from_pidfile(tmp_path: Path, port: int) -> None:
    first = ProcessService(tmp_path)
    inst = first.start(Launch(argv=fake_argv(port, "old"), port=port, launch_id="old"))
    _wait_listening(port)
    # A new service object (a resumed sweeper) finds the pidfile and stops exactly that group.
    second = ProcessService(tmp_path)
    second.start(Launch(argv=fake_argv(port, "new"), port=port, launch_id="new"))
    assert first._proc is not None
    first._proc.wait(10)  # reap our own child so the pid is really gone
    with pytest.raises(ProcessLookupError):
        os.killpg(inst.pid or 0, 0)
    _wait_listening(port)
    second.stop(timeout=5)
