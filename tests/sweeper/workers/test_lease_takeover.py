"""Taking over a gone holder's lease whose recorded server pidfile is damaged (issue 40 #8):
`[1]`, `{"pid": "abc"}`, `{"pid": 1e400}` and their kin were an internal error (exit 70); now
`sweeper run` stops with one line naming the lease and the pidfile (exit 5), leaves both as they
were, and signals nothing: a live process the pidfile half-names survives."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.hosts.lease import Holder
from sweeper.hosts.local import process_start_ticks
from sweeper.services import ServiceError
from sweeper.services.local_process import reap_pidfile
from tests.sweeper.hosts.lease_damage import GONE

#: Pidfile contents that name no process record; `{pid}` / `{ticks}`: a live bystander's.
DAMAGED_PIDFILES = [
    "[1]",
    '{"pid": "abc"}',
    '{"pid": 1e400}',
    '{"pid": {pid}}',  # no start_ticks: which process it was cannot be told
    '{"pid": true, "start_ticks": {ticks}}',
    '{"pid": {pid}.0, "start_ticks": {ticks}}',
    '{"pid": 1, "start_ticks": 1}',
    '{"pid": 99999999999, "start_ticks": null}',
    "",
    "\xff",
]


@pytest.fixture(scope="module")
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A live process the damaged pidfiles half-name: it must outlive every case."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def _fill(text: str, proc: subprocess.Popen[bytes]) -> str:
    ticks = process_start_ticks(proc.pid)
    return text.replace("{pid}", str(proc.pid)).replace("{ticks}", str(ticks))


@pytest.mark.parametrize("text", DAMAGED_PIDFILES)
def test_a_stale_lease_with_a_damaged_pidfile_stops_the_run_and_kills_nothing(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bystander: subprocess.Popen[bytes]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    pidfile = tmp_path / "old-run" / "runtime.pid"
    pidfile.parent.mkdir()
    pidfile.write_bytes(_fill(text, bystander).encode("utf-8", "surrogateescape"))
    before = pidfile.read_bytes()
    lease = state / "lease.json"
    lease.write_text(Holder.model_validate({**GONE, "server": {"pidfile": str(pidfile)}}).text())
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: t\nruntime: {model: no-such-model, port: 18339}\n"
        "workload:\n  prompts: [{id: a, text: hi}]\n"
    )
    monkeypatch.setenv("SWEEPER_STATE_DIR", str(state))
    done = CliRunner().invoke(app, ["run", str(spec), "--results", str(tmp_path / "r")])
    lines = done.output.strip().splitlines()
    assert done.exit_code == 5 and len(lines) == 1, done.output
    assert lines[0].startswith(f"error: host local: the lease file {lease} names sweep 'old' ")
    assert f"the pidfile {pidfile} " in lines[0] and "remove the pidfile" in lines[0], lines
    assert bystander.poll() is None  # never signalled
    assert pidfile.read_bytes() == before and lease.read_text().startswith('{"controller"')


@pytest.mark.parametrize("text", DAMAGED_PIDFILES)
def test_reaping_a_damaged_pidfile_is_a_service_error(
    text: str, tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    """The same pidfiles left by a killed sweeper in its own service directory: the point's
    start fails with the reason (a ServiceError), never a crash, never a signal."""
    pidfile = tmp_path / "runtime.pid"
    pidfile.write_bytes(_fill(text, bystander).encode("utf-8", "surrogateescape"))
    with pytest.raises(ServiceError, match=f"the pidfile {pidfile} holds no process record"):
        reap_pidfile(pidfile, timeout=1)
    assert bystander.poll() is None and pidfile.exists()


def test_a_sound_pidfile_of_a_recycled_pid_is_dropped_unsignalled(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    pidfile = tmp_path / "runtime.pid"
    ticks = process_start_ticks(bystander.pid)
    assert ticks is not None
    record = {"pid": bystander.pid, "start_ticks": ticks - 1}
    pidfile.write_text(json.dumps(record))
    assert reap_pidfile(pidfile, timeout=1) is False
    assert bystander.poll() is None and not pidfile.exists()
