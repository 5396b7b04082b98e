"""The two stages of a test host that run inside its new namespaces, ending in systemd as PID 1.

Started by tests/testhosts.py as `python -m tests.testhost_stages _stage1 NAME INDEX` (with
PYTHONPATH at the checkout) inside `unshare --pid --mount --uts --ipc` in the host's netns.
Stage 1 moves into the host's cgroup and unshares a cgroup namespace there; stage 2 builds the
root filesystem (overlay of this machine's /, API filesystems, a minimal /dev, the checkout and any
shared directories bound in), writes the host's identity and its HostOptions into the overlay's
upper layer, pivots into it and execs systemd with reduced capabilities.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.testhost_base import (
    BASE,
    CLEAN_PATH,
    DROP_CAPS,
    MASK_UNITS,
    PROJECT_DIR,
    UPPER_SIZE,
    HostOptions,
    check,
    force_symlink,
    host_cgroup,
)

#: How this module is run (`python -m`, with PYTHONPATH at the checkout).
STAGES_MODULE = "tests.testhost_stages"


def stage1(name: str, index: str) -> None:
    """PID 1 of the new pid namespace (still sees this machine's /proc): record pids, cgroup."""
    work = BASE / name
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    host_pid = status["NSpid"].split()[0]
    parent_pid = status["PPid"].strip()
    start = Path(f"/proc/{host_pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (work / "pid.tmp").write_text(f"{host_pid} {start} {parent_pid}\n")
    cgroup = host_cgroup(name)
    assert cgroup is not None
    cgroup.mkdir(parents=True, exist_ok=True)
    (cgroup / "cgroup.procs").write_text("0")  # move into this host's cgroup
    # A cgroup namespace rooted there: systemd inside sees a pure cgroup2 tree of its own.
    os.execv(
        "/usr/bin/unshare",
        ["unshare", "--cgroup", "--", sys.executable, "-m", STAGES_MODULE, "_stage2", name, index],
    )


def stage2(name: str, index: str) -> None:
    """Build the root filesystem (overlay, API filesystems, /dev, sshd config) and exec systemd."""
    work = BASE / name
    options = HostOptions.read(work)
    root = work / "root"
    r = str(root)
    check(["hostname", name])
    check(["mount", "--make-rprivate", "/"])
    check(["mount", "-t", "tmpfs", "-o", f"mode=755,size={UPPER_SIZE}", "tmpfs", str(work / "rw")])
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
        check(argv)
    if Path(f"{r}/proc/sysrq-trigger").exists():
        check(["mount", "--bind", f"{r}/proc/sysrq-trigger", f"{r}/proc/sysrq-trigger"])
        check(["mount", "-o", "remount,bind,ro", f"{r}/proc/sysrq-trigger"])
    _minimal_dev(r)
    check(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", f"{r}/dev/shm"])
    check(["mount", "-t", "tmpfs", "-o", "mode=755,nosuid,nodev", "tmpfs", f"{r}/run"])
    # also hides this machine's /tmp (where the harness keeps its keys)
    check(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", f"{r}/tmp"])
    # The checkout (with its .venv) must be visible inside at the same path wherever it was cloned:
    # under /tmp the tmpfs above would hide it, and on another filesystem the overlay of / would
    # not include it. Read-only, so a host cannot write the checkout.
    _bind(str(PROJECT_DIR), r, read_only=True)
    # A cluster's shared directories (bundle, logs): the same files on every host, and here.
    for shared in options.shared_dirs:
        _bind(shared, r, read_only=False)
    _write_identity(root, name, index, work, options)
    if options.skel:
        check(["cp", "-a", f"{options.skel}/.", f"{r}/"])
    os.replace(work / "pid.tmp", work / "pid")
    # pivot_root(".", ".") + lazy umount drops every mount of this machine from the namespace.
    os.chdir(r)
    check(["pivot_root", ".", "."])
    check(["umount", "-l", "."])
    os.chdir("/")
    os.execve(
        "/usr/bin/env",
        ["env", "-i", "container=testhost", "TERM=dumb", f"PATH={CLEAN_PATH}"]
        + ["setpriv", "--bounding-set", DROP_CAPS, "--"]
        + ["/lib/systemd/systemd", "--system", "--show-status=no"],
        {},
    )


def _minimal_dev(r: str) -> None:
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        Path(f"{r}/dev/{node}").touch()
        check(["mount", "--bind", f"/dev/{node}", f"{r}/dev/{node}"])
    for sub in ("pts", "shm", "mqueue"):
        Path(f"{r}/dev/{sub}").mkdir()
    dev_pts = "newinstance,ptmxmode=0666,mode=620,gid=5"
    check(["mount", "-t", "devpts", "-o", dev_pts, "devpts", f"{r}/dev/pts"])
    for link, target in (
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{r}/dev/{link}")


def _bind(path: str, r: str, *, read_only: bool) -> None:
    inside = f"{r}{path}"
    os.makedirs(inside, exist_ok=True)
    check(["mount", "--bind", path, inside])
    if read_only:
        check(["mount", "-o", "remount,bind,ro", inside])


def _write_identity(root: Path, name: str, index: str, work: Path, options: HostOptions) -> None:
    """Hostname, machine id, sshd key and config, units: all in the overlay upper layer only."""
    (root / "etc/hostname").write_text(f"{name}\n")
    hosts = options.etc_hosts or ((f"10.200.{index}.2", name),)
    (root / "etc/hosts").write_text(
        "127.0.0.1 localhost\n" + "".join(f"{addr} {host}\n" for addr, host in hosts)
    )
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
        if unit in options.units:
            (systemd_dir / unit).unlink(missing_ok=True)
        else:
            force_symlink("/dev/null", systemd_dir / unit)
    force_symlink("/lib/systemd/system/multi-user.target", systemd_dir / "default.target")
    wants = systemd_dir / "multi-user.target.wants"
    wants.mkdir(exist_ok=True)
    for unit in ("ssh.service", *options.units):
        force_symlink(f"/lib/systemd/system/{unit}", wants / unit)


if __name__ == "__main__":
    stage, host_name, host_index = sys.argv[1:4]
    {"_stage1": stage1, "_stage2": stage2}[stage](host_name, host_index)
