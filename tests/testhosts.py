"""Disposable "remote GPU hosts" for the SSH / systemd tests, built on this one machine (root only).

A test host is its own network namespace (veth pair: 10.200.N.1 here, 10.200.N.2 inside, no route
out), pid / mount / uts / ipc / cgroup namespaces, an overlay root (lower = this machine's /,
upper = tmpfs, so nothing inside writes the real /etc), a real systemd as PID 1 and the distro
sshd with a fresh ed25519 host key and key-only root login. Boot ~1.5 s, teardown ~0.3 s.

Usage: `host = boot("sw1", 201)`, then `shutdown(host)`; `leftovers(name, index)` lists anything of
a host still present after teardown (processes, namespaces, veths, cgroups, files), for the leak
test. The namespace stages run this same file as a script (`python testhosts.py _stage1 ...`).

Pitfalls (learnt the hard way, kept here so nobody relearns them):
- hybrid cgroups: systemd inside needs a pure cgroup2 tree; we move into our own cgroup under the
  machine's cgroup2 mount and unshare the cgroup namespace there.
- clocks: there is no time namespace, so systemd and every process inside lose CAP_SYS_TIME (else
  timesyncd or `date -s` inside would set the real clock); module loading and raw I/O go too.
- journald runs inside on the tmpfs /run; units of the shared image that a fake GPU host must not
  run are masked.
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

BASE = Path(os.environ.get("SWEEPER_TESTHOST_BASE", "/tmp/sweeper-testhosts"))
PROJECT_DIR = Path(__file__).resolve().parents[1]
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BOOT_TIMEOUT_S = 60.0
UPPER_SIZE = "4g"
CGROUP_PARENT = "sweeper-testhost"
#: Units of the shared image that a test host must not run (they come from this machine's /etc).
MASK_UNITS = (
    "postgresql.service",
    "getty@.service",
    "console-getty.service",
    "serial-getty@.service",
    "systemd-timesyncd.service",
    "e2scrub_reap.service",
    "systemd-pstore.service",
    "cron.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "man-db.timer",
    "systemd-tmpfiles-clean.timer",
    "dev-hugepages.mount",
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
    "sys-kernel-config.mount",
    "sys-fs-fuse-connections.mount",
    "proc-sys-fs-binfmt_misc.automount",
    "systemd-binfmt.service",
    "systemd-modules-load.service",
    "kmod-static-nodes.service",
)
#: Capabilities the booted systemd and everything below it lose (see the module docstring).
DROP_CAPS = "-sys_module,-sys_time,-sys_rawio,-syslog,-wake_alarm,-block_suspend,-audit_read"


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
            return f"test hosts need {tool!r} (run .ci/setup-testhosts.sh)"
    if not Path("/usr/sbin/sshd").exists():
        return "test hosts need sshd (apt-get install openssh-server, see .ci/setup-testhosts.sh)"
    if not Path("/lib/systemd/systemd").exists():
        return "test hosts need systemd (/lib/systemd/systemd)"
    if _cgroup2_root() is None:
        return "test hosts need a cgroup2 hierarchy (pure cgroup v1 machines are not supported)"
    return None


# --------------------------------------------------------------------------- host side


def boot(name: str, index: int) -> TestHost:
    """Bring a test host up and wait for a key-authenticated, host-key-checked SSH login."""
    if not (name.isalnum() and name[0].isalpha() and name.islower() and len(name) <= 12):
        raise ValueError("name must be [a-z][a-z0-9]{0,11}")
    if not 1 <= index <= 254:
        raise ValueError("index must be 1..254")
    t0 = time.monotonic()
    work = BASE / name
    if _pid_alive(work / "pid"):
        raise RuntimeError(f"test host {name} is already up")
    if Path(f"/run/netns/{_netns(name)}").exists():
        raise RuntimeError(f"netns {_netns(name)} exists (stale? call shutdown)")
    shutil.rmtree(work, ignore_errors=True)
    (work / "root").mkdir(parents=True)
    (work / "rw").mkdir()
    try:
        for key, comment in (("id_ed25519", "testhost-client"), ("ssh_host_ed25519_key", name)):
            _check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", key], work)
        host_key = " ".join((work / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        address = f"10.200.{index}.2"
        (work / "known_hosts").write_text(f"{address} {host_key}\n")
        _network_up(name, index)
        with open(work / "console.log", "wb") as console:
            subprocess.Popen(  # detached: CI pipes never hang on it
                [
                    "nsenter",
                    f"--net=/run/netns/{_netns(name)}",
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
                    __file__,
                    "_stage1",
                    name,
                    str(index),
                ],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={"PATH": CLEAN_PATH, "SWEEPER_TESTHOST_BASE": str(BASE)},
            )
        pid = _wait_for_pid(work, t0)
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
    if _pid_alive(work / "pid"):
        pid, _, unshare_pid = (int(x) for x in (work / "pid").read_text().split())
        _signal(pid, signal.SIGRTMIN + 4)  # systemd: orderly poweroff
        if not _wait(lambda: not _pid_alive(work / "pid"), 10.0):
            _signal(pid, signal.SIGKILL)
            _wait(lambda: not _pid_alive(work / "pid"), 5.0)
        _wait(lambda: not _process_alive(unshare_pid), 1.0)
    subprocess.run(["ip", "netns", "del", _netns(name)], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", _veth(name)], capture_output=True, check=False)
    cgroup = _host_cgroup(name)
    if cgroup is not None and cgroup.is_dir():
        if "populated 1" in (cgroup / "cgroup.events").read_text():
            # Safety net for a lost pid file or escaped processes.
            (cgroup / "cgroup.kill").write_text("1")
            _wait(lambda: "populated 0" in (cgroup / "cgroup.events").read_text(), 5.0)
        _wait(lambda: _rmdir_tree(cgroup), 5.0)
        with contextlib.suppress(OSError):
            cgroup.parent.rmdir()  # only succeeds when no other test host is up
    if keep_files:
        (work / "pid").unlink(missing_ok=True)
    else:
        shutil.rmtree(work, ignore_errors=True)


def leftovers(name: str, pid: int | None = None) -> list[str]:
    """Everything of a host still present: should be [] after `shutdown`."""
    found = []
    if pid is not None and _process_alive(pid):
        found.append(f"process {pid}")
    if Path(f"/run/netns/{_netns(name)}").exists():
        found.append(f"netns {_netns(name)}")
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    if any(line.split()[0].split("@")[0] == _veth(name) for line in links.splitlines() if line):
        found.append(f"veth {_veth(name)}")
    cgroup = _host_cgroup(name)
    if cgroup is not None and cgroup.exists():
        found.append(f"cgroup {cgroup}")
    if (BASE / name).exists():
        found.append(f"directory {BASE / name}")
    mounts = Path("/proc/self/mountinfo").read_text()
    if str(BASE / name) in mounts:
        found.append("mounts under the host's directory")
    return found


def _network_up(name: str, index: int) -> None:
    # veth pair, no default route inside, ip_forward untouched: nothing leaves the machine.
    ns, veth = _netns(name), _veth(name)
    gateway, address = f"10.200.{index}.1", f"10.200.{index}.2"
    if (
        f" {gateway}/"
        in subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    ):
        raise RuntimeError(f"{gateway} is already in use on this machine")
    for argv in (
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
        ["ip", "addr", "add", f"{gateway}/24", "dev", veth],
        ["ip", "link", "set", veth, "up"],
        ["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
    ):
        _check(argv)


def _wait_for_pid(work: Path, t0: float) -> int:
    if not _wait(lambda: (work / "pid").exists(), 10.0):
        raise RuntimeError(f"namespace setup failed:\n{_console(work)}")
    return int((work / "pid").read_text().split()[0])


def _wait_for_systemd(work: Path, pid: int, t0: float) -> None:
    state = ""
    while time.monotonic() - t0 < BOOT_TIMEOUT_S:
        state = _exec(pid, ["systemctl", "is-system-running"], 10.0).stdout.strip()
        if state in ("running", "degraded"):
            return
        if not _pid_alive(work / "pid"):
            raise RuntimeError(f"systemd died during boot:\n{_console(work)}")
        time.sleep(0.1)
    raise RuntimeError(f"boot timeout (state={state!r})")


def _wait_for_ssh(host: TestHost, t0: float) -> None:
    # Readiness is a real key-authenticated, host-key-verified login, not just an open port.
    argv = ssh_argv(host, ["true"])
    while time.monotonic() - t0 < BOOT_TIMEOUT_S:
        if subprocess.run(argv, capture_output=True, timeout=15, check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"ssh login to {host.address}:22 fails")


def ssh_argv(host: TestHost, command: list[str]) -> list[str]:
    """The OpenSSH client command for `host` (strict host keys, no user config)."""
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
        f"root@{host.address}",
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


# --------------------------------------------------------------------------- helpers


def _netns(name: str) -> str:
    return f"sw-{name}"


def _veth(name: str) -> str:
    return f"sw-{name}"


def _cgroup2_root() -> Path | None:
    for candidate in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        kind = subprocess.run(
            ["stat", "-fc", "%T", str(candidate)], capture_output=True, text=True, check=False
        ).stdout.strip()
        if kind == "cgroup2fs":
            return candidate
    return None


def _host_cgroup(name: str) -> Path | None:
    root = _cgroup2_root()
    return None if root is None else root / CGROUP_PARENT / name


def _pid_alive(pid_file: Path) -> bool:
    """The pid file holds "PID STARTTIME UNSHARE_PID"; true if that exact process still runs."""
    try:
        pid, start, _ = pid_file.read_text().split()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return False
    return fields[0] != "Z" and fields[19] == start  # state, starttime (fields 3 and 22)


def _process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _rmdir_tree(path: Path) -> bool:
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            sub.rmdir()
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _wait(predicate: object, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():  # type: ignore[operator]
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def _check(argv: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")


def _console(work: Path) -> str:
    try:
        return (work / "console.log").read_text()[-4000:]
    except OSError:
        return ""


# --------------------------------------------------------------------------- inside the namespaces


def _stage1(name: str, index: str) -> None:
    """PID 1 of the new pid namespace (still sees this machine's /proc): record pids, cgroup."""
    work = BASE / name
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    host_pid = status["NSpid"].split()[0]
    parent_pid = status["PPid"].strip()
    start = Path(f"/proc/{host_pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (work / "pid.tmp").write_text(f"{host_pid} {start} {parent_pid}\n")
    cgroup = _host_cgroup(name)
    assert cgroup is not None
    cgroup.mkdir(parents=True, exist_ok=True)
    (cgroup / "cgroup.procs").write_text("0")  # move into this host's cgroup
    # A cgroup namespace rooted there: systemd inside sees a pure cgroup2 tree of its own.
    os.execv(
        "/usr/bin/unshare",
        ["unshare", "--cgroup", "--", sys.executable, __file__, "_stage2", name, index],
    )


def _stage2(name: str, index: str) -> None:
    """Build the root filesystem (overlay, API filesystems, /dev, sshd config) and exec systemd."""
    work = BASE / name
    root = work / "root"
    r = str(root)
    _check(["hostname", name])
    mounts = [
        ["mount", "--make-rprivate", "/"],
        ["mount", "-t", "tmpfs", "-o", f"mode=755,size={UPPER_SIZE}", "tmpfs", str(work / "rw")],
    ]
    for argv in mounts:
        _check(argv)
    (work / "rw" / "upper").mkdir()
    (work / "rw" / "work").mkdir()
    overlay = f"lowerdir=/,upperdir={work}/rw/upper,workdir={work}/rw/work"
    steps = [
        ["mount", "-t", "overlay", "overlay", "-o", overlay, r],
        # fresh proc (our pid ns), read-only sysfs (shows our netns), cgroup2 (our cgroup ns)
        ["mount", "-t", "proc", "-o", "nosuid,nodev,noexec", "proc", f"{r}/proc"],
        ["mount", "--bind", f"{r}/proc/sys", f"{r}/proc/sys"],
        ["mount", "-o", "remount,bind,ro", f"{r}/proc/sys"],
        ["mount", "--bind", f"{r}/proc/sys/net", f"{r}/proc/sys/net"],
        ["mount", "-o", "remount,bind,rw", f"{r}/proc/sys/net"],  # per netns: may stay rw
        ["mount", "-t", "sysfs", "-o", "ro,nosuid,nodev,noexec", "sysfs", f"{r}/sys"],
        ["mount", "-t", "cgroup2", "-o", "nosuid,nodev,noexec", "cgroup2", f"{r}/sys/fs/cgroup"],
        # a minimal /dev: none of the real machine's consoles, ttys, kmsg or disks
        ["mount", "-t", "tmpfs", "-o", "mode=755,nosuid,size=4m", "tmpfs", f"{r}/dev"],
    ]
    for argv in steps:
        _check(argv)
    if Path(f"{r}/proc/sysrq-trigger").exists():
        _check(["mount", "--bind", f"{r}/proc/sysrq-trigger", f"{r}/proc/sysrq-trigger"])
        _check(["mount", "-o", "remount,bind,ro", f"{r}/proc/sysrq-trigger"])
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        Path(f"{r}/dev/{node}").touch()
        _check(["mount", "--bind", f"/dev/{node}", f"{r}/dev/{node}"])
    for sub in ("pts", "shm", "mqueue"):
        Path(f"{r}/dev/{sub}").mkdir()
    dev_pts = "newinstance,ptmxmode=0666,mode=620,gid=5"
    _check(["mount", "-t", "devpts", "-o", dev_pts, "devpts", f"{r}/dev/pts"])
    for link, target in (
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{r}/dev/{link}")
    _check(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", f"{r}/dev/shm"])
    _check(["mount", "-t", "tmpfs", "-o", "mode=755,nosuid,nodev", "tmpfs", f"{r}/run"])
    # also hides this machine's /tmp (where the harness keeps its keys)
    _check(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", f"{r}/tmp"])
    # The checkout (with its .venv) must be visible inside at the same path wherever it was cloned:
    # under /tmp the tmpfs above would hide it, and on another filesystem the overlay of / would
    # not include it. Read-only, so a host cannot write the checkout.
    inside = f"{r}{PROJECT_DIR}"
    os.makedirs(inside, exist_ok=True)
    _check(["mount", "--bind", str(PROJECT_DIR), inside])
    _check(["mount", "-o", "remount,bind,ro", inside])
    _write_identity(root, name, index, work)
    os.replace(work / "pid.tmp", work / "pid")
    # pivot_root(".", ".") + lazy umount drops every mount of this machine from the namespace.
    os.chdir(r)
    _check(["pivot_root", ".", "."])
    _check(["umount", "-l", "."])
    os.chdir("/")
    os.execve(
        "/usr/bin/env",
        ["env", "-i", "container=testhost", "TERM=dumb", f"PATH={CLEAN_PATH}"]
        + ["setpriv", "--bounding-set", DROP_CAPS, "--"]
        + ["/lib/systemd/systemd", "--system", "--show-status=no"],
        {},
    )


def _write_identity(root: Path, name: str, index: str, work: Path) -> None:
    """Hostname, machine id, sshd key and config, masked units: all in the overlay upper only."""
    (root / "etc/hostname").write_text(f"{name}\n")
    (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n10.200.{index}.2 {name}\n")
    machine_id = subprocess.run(["systemd-id128", "new"], capture_output=True, text=True).stdout
    (root / "etc/machine-id").write_text(machine_id)
    for suffix in ("", ".pub"):
        shutil.copyfile(
            work / f"ssh_host_ed25519_key{suffix}", root / f"etc/ssh/ssh_host_ed25519_key{suffix}"
        )
    os.chmod(root / "etc/ssh/ssh_host_ed25519_key", 0o600)
    (root / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
    (root / "etc/ssh/sshd_config.d/00-testhost.conf").write_text(
        "HostKey /etc/ssh/ssh_host_ed25519_key\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUseDNS no\n"
    )
    # This machine's root shell rc (pyenv init and the like) would add ~0.3 s to every command:
    # a test host has the plain root account of a fresh GPU host.
    (root / "root/.bashrc").write_text("# test host: plain root shell\n")
    shutil.rmtree(root / "root/.ssh", ignore_errors=True)
    (root / "root/.ssh").mkdir(mode=0o700)
    shutil.copyfile(work / "id_ed25519.pub", root / "root/.ssh/authorized_keys")
    os.chmod(root / "root/.ssh/authorized_keys", 0o600)
    systemd_dir = root / "etc/systemd/system"
    for unit in MASK_UNITS:
        _force_symlink("/dev/null", systemd_dir / unit)
    _force_symlink("/lib/systemd/system/multi-user.target", systemd_dir / "default.target")
    (systemd_dir / "multi-user.target.wants").mkdir(exist_ok=True)
    _force_symlink(
        "/lib/systemd/system/ssh.service", systemd_dir / "multi-user.target.wants/ssh.service"
    )


def _force_symlink(target: str, link: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(target, link)


if __name__ == "__main__":
    stage, host_name, host_index = sys.argv[1:4]
    {"_stage1": _stage1, "_stage2": _stage2}[stage](host_name, host_index)
