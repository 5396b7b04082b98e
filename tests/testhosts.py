"""Disposable "remote GPU hosts" for the SSH / systemd / Slurm tests, built on this machine (root).

A test host is its own network namespace, pid / mount / uts / ipc / cgroup namespaces, an overlay
root (lower = this machine's /, upper = tmpfs, so nothing inside writes the real /etc), a real
systemd as PID 1 and the distro sshd with a fresh ed25519 host key and key-only root login. Boot
~1.5 s, teardown ~0.3 s.

Two network modes (tests/testhost_net.py): by default a host has one veth on its own subnet
(10.200.N.1 here, 10.200.N.2 inside, no route to other hosts); with `HostOptions(bridge=...)` it
is a port of a cluster's shared bridge, so the hosts of a cluster reach each other
(tests/testhost_cluster.py builds such clusters, with /etc/hosts and a shared directory).

Usage: `host = boot("sw1", 201)`, then `shutdown(host)`; `leftovers(name, index)` lists anything of
a host still present after teardown (processes, namespaces, veths, cgroups, files), for the leak
test. The namespace stages are tests/testhost_stages.py, run as `python -m`.

Pitfalls (learnt the hard way, kept here so nobody relearns them):
- hybrid cgroups: systemd inside needs a pure cgroup2 tree; we move into our own cgroup under the
  machine's cgroup2 mount and unshare the cgroup namespace there.
- clocks: there is no time namespace, so systemd and every process inside lose CAP_SYS_TIME (else
  timesyncd or `date -s` inside would set the real clock); module loading and raw I/O go too.
- journald runs inside on the tmpfs /run; units of the shared image that a fake GPU host must not
  run are masked (tests/testhost_base.MASK_UNITS).
- the upper layer cannot live on / (overlay returns ELOOP), hence a tmpfs mounted in the host's
  private mount namespace; /tmp inside is a fresh tmpfs that hides this machine's /tmp.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests import testhost_net
from tests.testhost_base import (
    BASE,
    CLEAN_PATH,
    DROP_CAPS,
    MASK_UNITS,
    PROJECT_DIR,
    HostOptions,
    cgroup2_root,
    check,
    host_cgroup,
    netns_name,
    pid_alive,
    process_alive,
    rmdir_tree,
    send_signal,
    wait,
)
from tests.testhost_stages import STAGES_MODULE

__all__ = [
    "BASE",
    "MASK_UNITS",
    "HostOptions",
    "TestHost",
    "boot",
    "leftovers",
    "shutdown",
    "shutdown_by_name",
    "skip_reason",
    "ssh_argv",
]

BOOT_TIMEOUT_S = 180.0  # an upper bound: a loaded machine boots slowly; a quiet one in ~2 s


@dataclass(frozen=True)
class TestHost:
    """A booted test host: how to reach it over SSH and how to enter it directly."""

    __test__ = False  # not a pytest test class

    name: str
    index: int
    address: str
    key_file: str
    known_hosts: str
    host_key_line: str  # "ssh-ed25519 AAAA..." (the public host key, for known_hosts files)
    pid: int  # the host's systemd, as seen from this machine
    port: int = 22
    user: str = "root"

    @property
    def root(self) -> Path:
        """The test host's root filesystem, readable from here."""
        return Path(f"/proc/{self.pid}/root")

    def exec(self, argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run argv inside the host (all its namespaces and root), not over SSH."""
        return _exec(self.pid, argv, timeout)


def skip_reason() -> str | None:
    """Why test hosts cannot be built here, or None when they can."""
    if os.geteuid() != 0:
        return "test hosts need root (namespaces, mounts, veths); CI runs as root"
    if sys.platform != "linux":
        return "test hosts need Linux namespaces"
    for tool in ("unshare", "nsenter", "setpriv", "ip", "ssh", "ssh-keygen", "systemd-id128"):
        if shutil.which(tool) is None:
            return f"test hosts need {tool!r} (run .ci/setup-system.sh)"
    if not Path("/usr/sbin/sshd").exists():
        return "test hosts need sshd (apt-get install openssh-server, see .ci/setup-system.sh)"
    if not Path("/lib/systemd/systemd").exists():
        return "test hosts need systemd (/lib/systemd/systemd)"
    if cgroup2_root() is None:
        return "test hosts need a cgroup2 hierarchy (pure cgroup v1 machines are not supported)"
    return None


def boot(name: str, index: int, options: HostOptions | None = None) -> TestHost:
    """Bring a test host up and wait for a key-authenticated, host-key-checked SSH login.

    `index` picks the subnet 10.200.`index`.0/24: the host's own (veth mode) or its cluster's
    (bridge mode, where `options.address` is the host's address on the bridge).
    """
    options = options or HostOptions()
    if not (name.isalnum() and name[0].isalpha() and name.islower() and len(name) <= 12):
        raise ValueError("name must be [a-z][a-z0-9]{0,11}")
    if not 1 <= index <= 254:
        raise ValueError("index must be 1..254")
    if (options.bridge is None) != (options.address is None):
        raise ValueError("bridge mode needs both options.bridge and options.address")
    t0 = time.monotonic()
    work = BASE / name
    if pid_alive(work / "pid"):
        raise RuntimeError(f"test host {name} is already up")
    if Path(f"/run/netns/{netns_name(name)}").exists():
        raise RuntimeError(f"netns {netns_name(name)} exists (stale? call shutdown)")
    shutil.rmtree(work, ignore_errors=True)
    (work / "root").mkdir(parents=True)
    (work / "rw").mkdir()
    try:
        for key, comment in (("id_ed25519", "testhost-client"), ("ssh_host_ed25519_key", name)):
            check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", key], work)
        host_key = " ".join((work / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        if options.bridge is not None and options.address is not None:
            testhost_net.attach(name, options.bridge, options.address)
            address = options.address
        else:
            address = testhost_net.veth_up(name, index)
        (work / "known_hosts").write_text(f"{address} {host_key}\n")
        options.write(work)
        _start_stages(name, index, work)
        pid = _wait_for_pid(work)
        _wait_for_systemd(work, pid, t0)
        host = TestHost(
            name=name,
            index=index,
            address=address,
            key_file=str(work / "id_ed25519"),
            known_hosts=str(work / "known_hosts"),
            host_key_line=host_key,
            pid=pid,
        )
        _wait_for_ssh(host, t0)
        return host
    except BaseException:
        shutdown_by_name(name, index, keep_files=True)
        raise


def shutdown(host: TestHost) -> None:
    """Power the host off and remove everything it had."""
    shutdown_by_name(host.name, host.index)


def shutdown_by_name(name: str, index: int, *, keep_files: bool = False) -> None:
    """Orderly poweroff, SIGKILL if that hangs, then netns, veth, cgroup and files."""
    work = BASE / name
    if pid_alive(work / "pid"):
        pid, _, unshare_pid = (int(x) for x in (work / "pid").read_text().split())
        send_signal(pid, signal.SIGRTMIN + 4)  # systemd: orderly poweroff
        if not wait(lambda: not pid_alive(work / "pid"), 10.0):
            send_signal(pid, signal.SIGKILL)
            wait(lambda: not pid_alive(work / "pid"), 5.0)
        wait(lambda: not process_alive(unshare_pid), 1.0)
    testhost_net.net_down(name)
    cgroup = host_cgroup(name)
    if cgroup is not None and cgroup.is_dir():
        if "populated 1" in (cgroup / "cgroup.events").read_text():
            # Safety net for a lost pid file or escaped processes.
            (cgroup / "cgroup.kill").write_text("1")
            wait(lambda: "populated 0" in (cgroup / "cgroup.events").read_text(), 5.0)
        wait(lambda: rmdir_tree(cgroup), 5.0)
        with contextlib.suppress(OSError):
            cgroup.parent.rmdir()  # only succeeds when no other test host is up
    if keep_files:
        (work / "pid").unlink(missing_ok=True)
    else:
        shutil.rmtree(work, ignore_errors=True)


def kill_whole(host: TestHost) -> None:
    """Pull the plug: cut the host's link, then SIGKILL all its processes at once (its cgroup).

    With the link down its address answers nothing (no RST, no ARP reply), as a dead machine's
    would not. `shutdown` removes the rest afterwards.
    """
    cgroup = host_cgroup(host.name)
    if cgroup is None or not cgroup.is_dir():
        raise RuntimeError(f"test host {host.name} has no cgroup")
    check(["ip", "link", "set", netns_name(host.name), "down"])
    (cgroup / "cgroup.kill").write_text("1")
    wait(lambda: "populated 0" in (cgroup / "cgroup.events").read_text(), 5.0)


def leftovers(name: str, pid: int | None = None) -> list[str]:
    """Everything of a host still present: should be [] after `shutdown`."""
    found = []
    if pid is not None and process_alive(pid):
        found.append(f"process {pid}")
    found += testhost_net.net_leftovers(name)
    cgroup = host_cgroup(name)
    if cgroup is not None and cgroup.exists():
        found.append(f"cgroup {cgroup}")
    if (BASE / name).exists():
        found.append(f"directory {BASE / name}")
    mounts = Path("/proc/self/mountinfo").read_text()
    if str(BASE / name) in mounts:
        found.append("mounts under the host's directory")
    return found


def _start_stages(name: str, index: int, work: Path) -> None:
    with open(work / "console.log", "wb") as console:
        subprocess.Popen(  # detached: CI pipes never hang on it
            [
                "nsenter",
                f"--net=/run/netns/{netns_name(name)}",
                "unshare",
                "--fork",
                "--pid",
                "--mount",
                "--uts",
                "--ipc",
                "--propagation",
                "private",
                "--kill-child",
                sys.executable,
                "-m",
                STAGES_MODULE,
                "_stage1",
                name,
                str(index),
            ],
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={
                "PATH": CLEAN_PATH,
                "SWEEPER_TESTHOST_BASE": str(BASE),
                "PYTHONPATH": str(PROJECT_DIR),
            },
        )


def _wait_for_pid(work: Path) -> int:
    if not wait(lambda: (work / "pid").exists(), 10.0):
        raise RuntimeError(f"namespace setup failed:\n{_console(work)}")
    return int((work / "pid").read_text().split()[0])


def _wait_for_systemd(work: Path, pid: int, t0: float) -> None:
    state = ""
    while time.monotonic() - t0 < BOOT_TIMEOUT_S:
        state = _exec(pid, ["systemctl", "is-system-running"], 10.0).stdout.strip()
        if state in ("running", "degraded"):
            return
        if not pid_alive(work / "pid"):
            raise RuntimeError(f"systemd died during boot:\n{_console(work)}")
        time.sleep(0.1)
    raise RuntimeError(f"boot timeout (state={state!r})")


def _wait_for_ssh(host: TestHost, t0: float) -> None:
    # Readiness is a real key-authenticated, host-key-verified login, not just an open port.
    # A loaded machine (CI runs beside other work) can make one login take longer than any fixed
    # figure: an attempt that times out is a failed attempt, tried again until the boot deadline.
    argv = ssh_argv(host, ["true"])
    last = "no attempt finished"
    while time.monotonic() - t0 < BOOT_TIMEOUT_S:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except subprocess.TimeoutExpired:
            last = "a login attempt took over 30 s"
            continue
        if out.returncode == 0:
            return
        last = f"exit {out.returncode}: {out.stderr.strip()[-300:]}"
        time.sleep(0.1)
    raise RuntimeError(f"ssh login to {host.address}:22 fails ({last})")


def ssh_argv(host: TestHost, command: list[str], *options: str) -> list[str]:
    """The OpenSSH client command for `host` (strict host keys, no user config).

    `options` go before the destination (e.g. "-L", "8000:node:8000", "-N").
    """
    return [
        "ssh",
        "-F",
        "/dev/null",
        "-q",
        "-i",
        host.key_file,
        "-o",
        f"UserKnownHostsFile={host.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
        *options,
        f"{host.user}@{host.address}",
        *command,
    ]


def _exec(pid: int, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    # Same reduced capability bounding set as the host's systemd: there is no time namespace.
    return subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--"]
        + ["setpriv", "--bounding-set", DROP_CAPS, "--"]
        + ["env", "-i", f"PATH={CLEAN_PATH}", "TERM=dumb", "LANG=C.UTF-8", "HOME=/root"]
        + ["SYSTEMD_PAGER=", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _console(work: Path) -> str:
    try:
        return (work / "console.log").read_text()[-4000:]
    except OSError:
        return ""
