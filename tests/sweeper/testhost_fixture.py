"""Pytest fixtures for the remote-host tests: two disposable SSH + systemd test hosts per session.

Registered for the whole suite by `tests/conftest.py` (pytest_plugins). Tests that use them skip
with the reason from `tests.testhosts.skip_reason()` where they cannot run (not root, no sshd).
The hosts share one known_hosts file for the session (never the user's ~/.ssh) holding exactly
their keys, so strict host-key checking is exercised by every test.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.hosts.ssh import SSHHost
from sweeper.hosts.ssh_target import SSHTarget
from tests import testhosts
from tests.testhosts import TestHost

#: The test hosts see this machine's root filesystem (copy-on-write overlay), so the Python
#: running the tests (the project's venv, torch included) exists on them at the same path.
VENV_PYTHON = sys.executable


def free_index() -> int:
    """A 10.200.N.0/24 subnet and host name not in use on this machine."""
    used = subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    candidates = list(range(100, 250))
    random.shuffle(candidates)
    for index in candidates:
        name = f"swt{index}"
        if f" 10.200.{index}.1/" in used or Path(f"/run/netns/sw-{name}").exists():
            continue
        if (testhosts.BASE / name).exists():
            continue
        return index
    raise RuntimeError("no free 10.200.N.0/24 subnet for a test host")


def boot_free() -> TestHost:
    """Boot a test host on a free index (one retry: another run may take the same index)."""
    for attempt in (1, 2):
        index = free_index()
        try:
            return testhosts.boot(f"swt{index}", index)
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def ssh_host(host: TestHost, known_hosts: str | None = None, **kwargs: object) -> SSHHost:
    """An SSHHost for a test host, checking keys against `known_hosts` (default: the host's)."""
    target = SSHTarget(
        hostname=host.address,
        port=host.port,
        user=host.user,
        key_files=(host.key_file,),
        known_hosts=known_hosts or host.known_hosts,
    )
    return SSHHost(host.name, target, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def testhost_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[TestHost]]:
    """Two test hosts booted at once, torn down at the end of the session."""
    reason = testhosts.skip_reason()
    if reason:
        pytest.skip(reason)
    hosts: list[TestHost] = []
    try:
        hosts.append(boot_free())
        hosts.append(boot_free())
        yield hosts
    finally:
        for host in hosts:
            testhosts.shutdown(host)


@pytest.fixture(scope="session")
def session_known_hosts(
    testhost_pair: list[TestHost], tmp_path_factory: pytest.TempPathFactory
) -> str:
    """One known_hosts file for the session holding exactly the test hosts' keys."""
    path = tmp_path_factory.mktemp("ssh") / "known_hosts"
    path.write_text("".join(f"{h.address} {h.host_key_line}\n" for h in testhost_pair))
    return str(path)


@pytest.fixture
def host_a(testhost_pair: list[TestHost], session_known_hosts: str) -> Iterator[SSHHost]:
    """A fresh SSH connection to the first test host."""
    host = ssh_host(testhost_pair[0], session_known_hosts)
    yield host
    host.close()


def hosts_yaml(hosts: list[TestHost], known_hosts: str, **extra: str) -> str:
    """The `hosts:` block of a spec for the test hosts (the venv's Python runs the runtime)."""
    lines = ["hosts:"]
    for host in hosts:
        lines += [
            f"  - name: {host.name}",
            f"    address: {host.address}",
            f"    user: {host.user}",
            f"    key_file: {host.key_file}",
            f"    known_hosts: {known_hosts}",
            f"    python: {VENV_PYTHON}",
            "    remote_root: /opt/ddtree-sweeper",
        ]
        lines += [f"    {key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"
