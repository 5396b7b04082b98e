"""A cluster of test hosts: one shared bridge (10.200.N.0/24, this machine at .1, hosts at .10,
.11, ...), every host's name in every host's /etc/hosts, one shared directory bind-mounted at the
same path on all of them (and readable here at that path), one known_hosts file for them all.

`boot_cluster(index, names, prepare)` boots the hosts in parallel; `prepare(name, skel)` fills the
directory tree copied over that host's root and returns the units it enables (e.g. a Slurm config
and its daemons, tests/slurm_cluster.py). `shutdown_cluster` removes everything, bridge included;
`cluster_leftovers` lists what is still there (the leak check).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests import testhost_net, testhosts
from tests.testhost_base import BASE, HostOptions
from tests.testhosts import TestHost

#: Fills a host's skel directory; returns the units that host enables.
Prepare = Callable[[str, Path], tuple[str, ...]]


@dataclass(frozen=True)
class Cluster:
    """Booted hosts on one bridge, with their shared directory and one known_hosts file."""

    index: int
    bridge: str
    hosts: tuple[TestHost, ...]
    shared_dir: Path
    known_hosts: str

    def host(self, name: str) -> TestHost:
        """The host called `name`."""
        return next(h for h in self.hosts if h.name == name)


def cluster_dir(index: int) -> Path:
    """Where this machine keeps a cluster's files (shared directory, skeletons)."""
    return BASE / f"cluster{index}"


def free_cluster_index() -> int:
    """A 10.200.N.0/24 subnet free on this machine (no address, bridge or cluster directory)."""
    candidates = list(range(100, 250))
    random.shuffle(candidates)
    for index in candidates:
        if testhost_net.gateway_in_use(index) or cluster_dir(index).exists():
            continue
        if testhost_net.link_exists(testhost_net.bridge_name(index)):
            continue
        return index
    raise RuntimeError("no free 10.200.N.0/24 subnet for a test cluster")


def boot_cluster(index: int, names: list[str], prepare: Prepare | None = None) -> Cluster:
    """Bridge, shared directory, then every host (in parallel); all torn down if any fails."""
    work = cluster_dir(index)
    if work.exists():
        raise RuntimeError(f"{work} exists (another cluster on this index, or a stale one)")
    bridge = testhost_net.bridge_up(index)
    addresses = {name: f"10.200.{index}.{10 + i}" for i, name in enumerate(names)}
    shared = work / "shared"
    try:
        shared.mkdir(parents=True)
        shared.chmod(0o1777)  # jobs may run as any user
        options = {}
        for name in names:
            skel = work / f"skel-{name}"
            skel.mkdir()
            units = prepare(name, skel) if prepare else ()
            options[name] = HostOptions(
                bridge=bridge,
                address=addresses[name],
                etc_hosts=tuple((addresses[n], n) for n in names),
                shared_dirs=(str(shared),),
                skel=str(skel),
                units=units,
            )
        with ThreadPoolExecutor(len(names)) as pool:
            futures = [pool.submit(testhosts.boot, n, index, options[n]) for n in names]
            hosts = []
            errors = []
            for future in futures:
                try:
                    hosts.append(future.result())
                except Exception as exc:  # collect all, so every started host is stopped
                    errors.append(exc)
        if errors:
            raise errors[0]
    except BaseException:
        _teardown(index, names, bridge)
        raise
    known_hosts = work / "known_hosts"
    known_hosts.write_text("".join(f"{h.address} {h.host_key_line}\n" for h in hosts))
    return Cluster(index, bridge, tuple(hosts), shared, str(known_hosts))


def shutdown_cluster(cluster: Cluster) -> None:
    """Power every host off, then remove the bridge and the cluster's files."""
    _teardown(cluster.index, [h.name for h in cluster.hosts], cluster.bridge)


def cluster_leftovers(cluster: Cluster) -> list[str]:
    """Everything of the cluster still present: should be [] after `shutdown_cluster`."""
    found = [item for h in cluster.hosts for item in testhosts.leftovers(h.name, h.pid)]
    if testhost_net.link_exists(cluster.bridge):
        found.append(f"bridge {cluster.bridge}")
    if cluster_dir(cluster.index).exists():
        found.append(f"directory {cluster_dir(cluster.index)}")
    return found


def _teardown(index: int, names: list[str], bridge: str) -> None:
    with ThreadPoolExecutor(max(1, len(names))) as pool:
        list(pool.map(lambda n: testhosts.shutdown_by_name(n, index), names))
    testhost_net.bridge_down(bridge)
    shutil.rmtree(cluster_dir(index), ignore_errors=True)
