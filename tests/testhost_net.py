"""Test host networking on this machine: a host's network namespace with one veth, either on its
own /24 (veth mode: 10.200.N.1 here, 10.200.N.2 inside) or as a port of a cluster's shared bridge
(bridge mode: the bridge holds 10.200.N.1, each host its own 10.200.N.x).

Nothing leaves the machine either way: no default route inside, ip_forward untouched, and the
bridge has no port but the hosts' veths.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.testhost_base import check, netns_name


def bridge_name(index: int) -> str:
    """The shared bridge of the cluster on 10.200.`index`.0/24."""
    return f"swbr{index}"


def gateway_in_use(index: int) -> bool:
    """Whether 10.200.`index`.1 is already an address of this machine."""
    return f" 10.200.{index}.1/" in _brief("addr")


def link_exists(device: str) -> bool:
    """Whether this machine has a network link called `device`."""
    return any(
        line.split()[0].split("@")[0] == device for line in _brief("link").splitlines() if line
    )


def veth_up(name: str, index: int) -> str:
    """Veth mode: netns + veth on 10.200.`index`.0/24; returns the address inside."""
    if gateway_in_use(index):
        raise RuntimeError(f"10.200.{index}.1 is already in use on this machine")
    ns = netns_name(name)
    address = f"10.200.{index}.2"
    check(["ip", "netns", "add", ns])
    check(["ip", "link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns])
    check(["ip", "addr", "add", f"10.200.{index}.1/24", "dev", ns])
    check(["ip", "link", "set", ns, "up"])
    _inside_up(ns, address)
    return address


def bridge_up(index: int) -> str:
    """Bridge mode: the cluster's bridge holding 10.200.`index`.1/24; returns its name."""
    if gateway_in_use(index):
        raise RuntimeError(f"10.200.{index}.1 is already in use on this machine")
    bridge = bridge_name(index)
    check(["ip", "link", "add", bridge, "type", "bridge"])
    try:
        check(["ip", "addr", "add", f"10.200.{index}.1/24", "dev", bridge])
        check(["ip", "link", "set", bridge, "up"])
    except RuntimeError:
        bridge_down(bridge)
        raise
    return bridge


def bridge_down(bridge: str) -> None:
    """Delete the bridge (its ports go with their hosts' namespaces)."""
    subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


def attach(name: str, bridge: str, address: str) -> None:
    """Bridge mode: netns + veth whose outer end is a port of `bridge`, `address`/24 inside."""
    if not link_exists(bridge):
        raise RuntimeError(f"bridge {bridge} does not exist (bridge_up first)")
    ns = netns_name(name)
    check(["ip", "netns", "add", ns])
    check(["ip", "link", "add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns])
    check(["ip", "link", "set", ns, "master", bridge])
    check(["ip", "link", "set", ns, "up"])
    _inside_up(ns, address)


def net_down(name: str) -> None:
    """Remove the host's namespace and veth (idempotent)."""
    ns = netns_name(name)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", ns], capture_output=True, check=False)


def net_leftovers(name: str) -> list[str]:
    """The host's namespace or veth if still present."""
    ns = netns_name(name)
    found = []
    if Path(f"/run/netns/{ns}").exists():
        found.append(f"netns {ns}")
    if link_exists(ns):
        found.append(f"veth {ns}")
    return found


def _inside_up(ns: str, address: str) -> None:
    check(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
    check(["ip", "-n", ns, "link", "set", "eth0", "up"])
    check(["ip", "-n", ns, "link", "set", "lo", "up"])


def _brief(kind: str) -> str:
    return subprocess.run(["ip", "-br", kind], capture_output=True, text=True).stdout
