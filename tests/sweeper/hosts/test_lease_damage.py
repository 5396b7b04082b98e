"""A damaged lease file never turns the lease off (issue 40 #3), on this machine through
`LocalHost` and the real `sh`/`flock`/`sha256sum` swap: every damage kind stops the taker with one
line naming the file and what to do, and leaves the file as it was; a dead holder's lease in
bytes this tool does not write (CRLF, trailing spaces) is taken over by its exact bytes; a lease
rewritten between the read and the swap is never replaced."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.exit_codes import EXIT_CHECK_FAILED
from sweeper.hosts.lease import (
    Controller,
    Holder,
    LeaseBusy,
    LeaseDamaged,
    boot_id,
    new_holder,
    read_lease,
    take,
)
from sweeper.hosts.local import LocalHost
from sweeper.hosts.ssh import SSHHost
from tests.sweeper.doctor.test_checks import _rows
from tests.sweeper.hosts.lease_damage import DAMAGES, GONE, Damage, damage, gone_text
from tests.sweeper.testhost_fixture import hosts_yaml
from tests.testhosts import TestHost


def _put(path: str, data: bytes) -> None:
    Path(path).write_bytes(data)


def _mkdir(path: str) -> None:
    Path(path).mkdir(parents=True)


def _snapshot(path: Path) -> bytes | str:
    return path.read_bytes() if path.is_file() else "directory" if path.is_dir() else "absent"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in DAMAGES])
def test_a_damaged_lease_stops_the_taker_or_is_taken_by_its_exact_bytes(
    case: Damage, tmp_path: Path
) -> None:
    host, here = LocalHost(), Controller.here()
    state = tmp_path / "state"
    path = damage(case, str(state), _put, _mkdir)
    before = _snapshot(Path(path)) if state.is_dir() else "state is a file"
    mine = new_holder("beta", here, boot_id(host))
    if not case.taken:
        with pytest.raises(LeaseDamaged) as refused:
            take(host, path, mine, here)
        line = str(refused.value)
        assert "\n" not in line and case.said in line, line
        assert line.startswith(f"host local: the lease file {path} "), line
        assert "remove it" in line or "move " in line, line
        after = _snapshot(Path(path)) if state.is_dir() else "state is a file"
        assert after == before  # nothing written, nothing removed
        assert not any(state.glob("*.new")) if state.is_dir() else state.is_file()
        return
    lease = take(host, path, mine, here)
    gone = (Holder.model_validate(GONE), "the host has booted since it was taken")
    assert lease.took_over == gone
    assert Path(path).read_bytes() == mine.text().encode()
    assert lease.release() and not Path(path).exists()


def test_a_live_holder_in_crlf_still_holds(tmp_path: Path) -> None:
    host, here = LocalHost(), Controller.here()
    path = tmp_path / "lease.json"
    live = new_holder("alpha", here, boot_id(host)).model_copy(update={"pid": os.getppid()})
    live = live.model_copy(update={"pid_start": None})
    path.write_bytes(live.text().encode() + b"\r\n")
    with pytest.raises(LeaseBusy, match="host local is leased to sweep 'alpha'"):
        take(host, str(path), new_holder("beta", here, boot_id(host)), here)


def test_a_lease_rewritten_between_read_and_swap_is_never_replaced(tmp_path: Path) -> None:
    """The swap compares the bytes read with the file's bytes: a second writer's CRLF (same
    holder once parsed) is a change, so the first swap is refused and the taker reads again."""
    host, here = LocalHost(), Controller.here()
    path = tmp_path / "lease.json"
    path.write_bytes(gone_text())
    seen: list[bytes] = []

    def rewrite(previous: Holder) -> None:
        seen.append(path.read_bytes())
        if len(seen) == 1:
            path.write_bytes(gone_text() + b"\r\n")

    lease = take(host, str(path), new_holder("beta", here, boot_id(host)), here, rewrite)
    assert seen == [gone_text(), gone_text() + b"\r\n"]  # read twice: the first swap refused
    assert lease.took_over is not None and path.read_bytes() == lease.holder.text().encode()
    found = read_lease(host, str(path))
    assert found is not None and found[0] == path.read_bytes()


def test_a_fifo_lease_is_refused_without_blocking(tmp_path: Path) -> None:
    host, here = LocalHost(), Controller.here()
    path = tmp_path / "lease.json"
    os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(LeaseDamaged, match="is not a regular file"):
        take(host, str(path), new_holder("beta", here, boot_id(host)), here)
    assert time.monotonic() - started < 10


# --- on an SSH test host ---------------------------------------------------------------------


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in DAMAGES])
def test_a_damaged_lease_on_an_ssh_host(case: Damage, host_a: SSHHost) -> None:
    """The same damages on a real sshd: read over SFTP (a directory, a file for a directory
    and a missing file look alike there), swapped by the host's own sh, flock and sha256sum."""
    here = Controller.here()
    state = f"/opt/lease-damage/{case.name}"
    host_a.run(["rm", "-rf", state])
    path = damage(case, state, host_a.put_file, lambda p: host_a.run(["mkdir", "-p", p]))
    mine = new_holder("beta", here, boot_id(host_a))
    if not case.taken:
        with pytest.raises(LeaseDamaged) as refused:
            take(host_a, path, mine, here)
        line = str(refused.value)
        assert case.said in line and line.startswith(f"host {host_a.name}: the lease file {path} ")
        listing = host_a.run(["ls", "-la", state], check=False).stdout
        assert ".new" not in listing, listing
        return
    lease = take(host_a, path, mine, here)
    assert lease.took_over is not None and lease.took_over[0] == Holder.model_validate(GONE)
    assert host_a.read_file(path) == mine.text().encode()
    assert lease.release()
    with pytest.raises(FileNotFoundError):
        host_a.read_file(path)


def test_run_and_doctor_stop_on_an_ssh_hosts_damaged_lease(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    host = testhost_pair[0]
    root = "/opt/lease-damage-cli"
    hosts = hosts_yaml([host], session_known_hosts).replace("/opt/ddtree-sweeper", root)
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: damagedlease\n" + hosts + "runtime: {model: fake, port: 18331}\n"
        "workload:\n  prompts: [{id: a, text: hi}]\n  max_tokens: 4\n"
    )
    exec_ = host.exec(["sh", "-c", f"rm -rf {root} && mkdir -p {root} && : > {root}/lease.json"])
    assert exec_.returncode == 0, exec_
    said = f"host {host.name}: the lease file {root}/lease.json is empty; if no run is using "
    said += f"host {host.name}, remove it (rm {root}/lease.json) and start again"
    run = CliRunner().invoke(app, ["run", str(spec), "--results", str(tmp_path / "r"), "--plain"])
    assert (run.exit_code, run.output.strip()) == (5, f"error: {said}"), run.output
    wide = {"COLUMNS": "600"}  # the detail on one line
    doctor = CliRunner().invoke(app, ["doctor", str(spec), "--no-selftest"], env=wide)
    assert doctor.exit_code == EXIT_CHECK_FAILED
    assert _rows(doctor.output)[(host.name, "lease")] == "fail"
    assert said in doctor.output, doctor.output
    assert host.exec(["cat", f"{root}/lease.json"]).stdout == ""
