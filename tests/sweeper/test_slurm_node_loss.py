"""A compute host killed whole in the middle of a `sweeper run` through a real Slurm: the point in
flight there fails with the scheduler's reason, the rest of its server config and every other
config finish on the surviving node, and no job of the run is left.

Boots its own cluster (it kills one of its hosts). Root + the Slurm packages only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import testhosts
from tests.slurm_cluster import (
    SlurmCluster,
    boot_slurm_cluster,
    shutdown_slurm_cluster,
    skip_reason,
)
from tests.sweeper.slurm_sweep import (
    points,
    recorded,
    run_dir_of,
    run_jobs,
    start_sweep,
    wait_for,
    write_spec,
)
from tests.testhost_cluster import cluster_leftovers

pytestmark = pytest.mark.slow
PORT = 18650


@pytest.fixture
def own_cluster() -> Iterator[SlurmCluster]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = boot_slurm_cluster()
    try:
        yield cluster
    finally:
        shutdown_slurm_cluster(cluster)
        assert cluster_leftovers(cluster.cluster) == []


def _serving_a_request(host: testhosts.TestHost) -> bool:
    """A measurement request is in flight on the host: a connection to the server's port."""
    out = host.exec(["ss", "-Htn", "state", "established", f"( sport = :{PORT} )"]).stdout
    return bool(out.strip())


def test_a_compute_host_killed_mid_sweep(own_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm = own_cluster
    # Through SSH tunnels via the login host: a dead node sends no RST, and the sweeper cuts its
    # tunnels as soon as Slurm gives the node up. Long enough points to be caught mid-point.
    spec = write_spec(tmp_path, "slurmloss", slurm, port=PORT, max_tokens=160, access="tunnel")
    results = tmp_path / "results"
    proc = start_sweep(spec, results, tmp_path / "run.log")
    try:
        # The AR baseline done, the other node measures a speculative config: kill it mid-point.
        ar = wait_for(lambda: len(recorded(run_dir_of(results, "slurmloss"))) >= 2, 300, "AR")
        ar_node = recorded(run_dir_of(results, "slurmloss"))[0]["slurm_node"]
        victim = next(n for n in slurm.nodes if n.name != ar_node)
        wait_for(lambda: _serving_a_request(victim), 60, "a request in flight on the victim", 0.05)
        killed_at = time.monotonic()
        testhosts.kill_whole(victim)
        code = proc.wait(400)
        took = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "run.log").read_text()
    run_dir = run_dir_of(results, "slurmloss")
    assert run_dir is not None and ar
    table = points(run_dir)
    assert code == 3, (table[["point_id", "status", "reason"]], log[-3000:])
    failed = table[table.status == "failed"]
    assert len(failed) == 1, failed[["point_id", "reason"]]
    lost = failed.iloc[0]
    assert lost.slurm_node == victim.name
    assert lost.reason.startswith(f"node failure: slurm job {lost.slurm_job_id} NODE_FAIL")
    assert "reason NodeDown" in lost.reason and "exit code 0:0" in lost.reason
    ok = table[table.status == "ok"]
    assert len(ok) == 5  # every other point, on the survivor after the kill
    survivor = next(n.name for n in slurm.nodes if n is not victim)
    later = ok[ok.started_at > lost.started_at]
    assert len(later) >= 2 and set(later.slurm_node) == {survivor}
    assert set(ok[ok["mode"] == "speculative"].determinism) == {"exact"}
    assert run_jobs(slurm, run_dir.name) == {}
    print(f"\nkilled node: the sweep ended {took:.1f} s later")
