"""The disposable test hosts themselves: two boot at once, and nothing of them is left behind.

Root only (skips with the reason elsewhere).
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import testhost_cluster, testhosts
from tests.sweeper.testhost_fixture import free_index, ssh_host


def test_skip_reason_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testhosts.os, "geteuid", lambda: 1000)
    assert "need root" in (testhosts.skip_reason() or "")
    monkeypatch.setattr(testhosts.os, "geteuid", lambda: 0)
    monkeypatch.setattr(testhosts.shutil, "which", lambda tool: None if tool == "unshare" else "/x")
    assert "'unshare'" in (testhosts.skip_reason() or "")


@pytest.mark.root
def test_two_hosts_boot_at_once_are_isolated_and_leave_nothing() -> None:
    reason = testhosts.skip_reason()
    if reason:
        pytest.skip(reason)
    first = free_index()
    second = next(i for i in range(first + 1, 250) if f"10.200.{i}." not in _addresses())
    names = [(f"swl{first}", first), (f"swl{second}", second)]
    with ThreadPoolExecutor(2) as pool:
        hosts = list(pool.map(lambda nv: testhosts.boot(*nv), names))
    try:
        for host in hosts:
            ssh = ssh_host(host)
            assert ssh.run(["hostname"]).stdout.strip() == host.name
            # the overlay root: writes inside never reach this machine's files
            ssh.run(["touch", "/etc/sweeper-overlay-probe"])
            ssh.close()
            assert not Path("/etc/sweeper-overlay-probe").exists()
            # no route out of the namespace
            routes = host.exec(["ip", "route"]).stdout
            assert "default" not in routes
            assert host.exec(["systemctl", "is-system-running"]).stdout.strip() in (
                "running",
                "degraded",
            )
    finally:
        for host in hosts:
            testhosts.shutdown(host)
    for host in hosts:
        assert testhosts.leftovers(host.name, host.pid) == []


def _addresses() -> str:
    return subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout


@pytest.mark.root
def test_a_bridged_cluster_shares_a_network_and_a_directory_and_leaves_nothing() -> None:
    reason = testhosts.skip_reason()
    if reason:
        pytest.skip(reason)
    index = testhost_cluster.free_cluster_index()
    names = [f"swc{index}a", f"swc{index}b"]
    cluster = testhost_cluster.boot_cluster(index, names)
    try:
        first, second = cluster.hosts
        assert (first.address, second.address) == (f"10.200.{index}.10", f"10.200.{index}.11")
        # each reaches the other by name (sshd of the other host answers on port 22)
        for host, other in ((first, second), (second, first)):
            probe = f"import socket; socket.create_connection(('{other.name}', 22), 5)"
            assert host.exec(["python3", "-c", probe]).returncode == 0, host.name
        # one known_hosts file for the cluster, checked strictly by a real login
        for host in cluster.hosts:
            ssh = testhosts.ssh_argv(host, ["hostname"])
            ssh[ssh.index(f"UserKnownHostsFile={host.known_hosts}")] = (
                f"UserKnownHostsFile={cluster.known_hosts}"
            )
            assert subprocess.run(ssh, capture_output=True, text=True).stdout.strip() == host.name
        # the shared directory: same path everywhere, and here
        first.exec(["sh", "-c", f"echo shared > {cluster.shared_dir}/note"])
        assert second.exec(["cat", f"{cluster.shared_dir}/note"]).stdout == "shared\n"
        assert (cluster.shared_dir / "note").read_text() == "shared\n"
        # still no route out
        assert "default" not in first.exec(["ip", "route"]).stdout
    finally:
        testhost_cluster.shutdown_cluster(cluster)
    assert testhost_cluster.cluster_leftovers(cluster) == []
