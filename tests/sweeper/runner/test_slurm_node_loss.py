"""A compute host killed whole in the middle of a `sweeper run` through a real Slurm: the point in
flight there fails with the scheduler's reason, the rest of its server config and every other
config finish on the surviving node, and no job of the run is left.

Boots its own cluster, with slurmdbd (it kills one of its hosts, and what accounting says of the
lost job is checked through the product's own reader). Root + the Slurm packages only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.hosts.slurm import SlurmLogin
from sweeper.hosts.slurm_commands import AllocationOptions, job_name
from sweeper.hosts.ssh import SSHHost, SSHTarget
from tests import testhosts
from tests.slurm_cluster import (
    JOBCOMP_LOG,
    SlurmCluster,
    accounting_cluster,
    node_states,
)
from tests.slurm_helpers import until
from tests.sweeper.slurm_sweep import (
    failures,
    points,
    run_dir_of,
    run_jobs,
    start_sweep,
    write_spec,
)
from tests.testhost_cluster import cluster_leftovers

pytestmark = [pytest.mark.slow, pytest.mark.root]
PORT = 18650


@pytest.fixture
def own_cluster() -> Iterator[SlurmCluster]:
    with accounting_cluster() as cluster:
        yield cluster
    assert cluster_leftovers(cluster.cluster) == []


def _serving_a_request(host: testhosts.TestHost) -> bool:
    """A measurement request is in flight on the host: a connection to the server's port."""
    out = host.exec(["ss", "-Htn", "state", "established", f"( sport = :{PORT} )"]).stdout
    return bool(out.strip())


def _ar_node(log: Path) -> str | None:
    """The node the AR config runs on, from the sweep's `wN: ar-... on NODE (job J)` line."""
    found = re.search(r": ar-\S+ on (\S+) \(job ", log.read_text()) if log.exists() else None
    return found.group(1) if found else None


def _measuring_on(log: Path, node: str) -> bool:
    """A point of a config on `node` has started measuring (its `LABEL tT-cC` line is out).
    Before that a connection to the port is readiness, proof or the capability probe, and a kill
    then fails a start (redone on the survivor), not a point."""
    text = log.read_text()
    labels = re.findall(rf": (\S+) on {re.escape(node)} \(job ", text)
    return any(re.search(rf"^\S+: {re.escape(label)} t\S+-c\d+$", text, re.M) for label in labels)


def test_a_compute_host_killed_mid_sweep(own_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm = own_cluster
    # Through SSH tunnels via the login host: a dead node sends no RST, and the sweeper cuts its
    # tunnels as soon as Slurm gives the node up. The kill waits for a request on the node.
    spec = write_spec(
        tmp_path, "slurmloss", slurm, port=PORT, max_tokens=64, prompts=1, access="tunnel"
    )
    results = tmp_path / "results"
    proc = start_sweep(spec, results, tmp_path / "run.log")
    try:
        # The node that runs the AR baseline is named in the log as it starts; the other node
        # measures speculative configs meanwhile: kill it mid-point. (Waiting for the AR to be
        # recorded first raced: on a loaded machine the other node could finish all its work
        # before the AR did, and no request was ever in flight there again.)
        ar_node = until(lambda: _ar_node(tmp_path / "run.log"), 300, "the AR config started")
        victim = next(n for n in slurm.nodes if n.name != ar_node)
        log_path = tmp_path / "run.log"
        until(
            lambda: _measuring_on(log_path, victim.name) and _serving_a_request(victim),
            60,
            "a measurement request in flight on the victim",
            0.05,
        )
        killed_at = time.monotonic()
        testhosts.kill_whole(victim)
        code = proc.wait(400)
        took = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "run.log").read_text()
    run_dir = run_dir_of(results, "slurmloss")
    assert run_dir is not None
    table = points(run_dir)
    assert set(table[table["mode"] == "ar"].slurm_node) == {ar_node}  # the log named it right
    assert code == 3, failures(table, log)
    failed = table[table.status == "failed"]
    assert len(failed) == 1, failures(table, log)
    lost = failed.iloc[0]
    assert lost.slurm_node == victim.name
    assert lost.reason.startswith(f"node failure: slurm job {lost.slurm_job_id} NODE_FAIL")
    assert "reason NodeDown" in lost.reason and "exit code 0:0" in lost.reason
    ok = table[table.status == "ok"]
    # Every other point, on the survivor after the kill; then (restart 1) the points of a
    # winner measured only after an in-place switch, again on a fresh process.
    assert len(ok[ok.restart == 0]) == 5
    assert set(ok[ok.restart > 0]["mode"]) <= {"speculative"}
    survivor = next(n.name for n in slurm.nodes if n is not victim)
    later = ok[ok.started_at > lost.started_at]
    assert len(later) >= 2 and set(later.slurm_node) == {survivor}
    assert set(ok[ok["mode"] == "speculative"].determinism) == {"exact"}
    assert run_jobs(slurm, run_dir.name) == {}
    assert node_states(slurm)[victim.name].startswith("down")
    # What else the scheduler kept of it: accounting (read by the product, as on a site with
    # slurmdbd: the job NODE_FAIL, the server's step merely CANCELLED with no exit code), the
    # jobcomp log, and srun's own view: exit 0 (never a node failure signal) and its words.
    c = slurm.controller
    ssh = SSHHost(c.name, SSHTarget(c.address, 22, c.user, (c.key_file,), None, slurm.known_hosts))
    try:
        login = SlurmLogin(ssh, run_dir.name, AllocationOptions(), str(slurm.shared_dir))
        rows = login.accounting(lost.slurm_job_id)
    finally:
        ssh.close()
    assert rows[lost.slurm_job_id] == (job_name(run_dir.name), "NODE_FAIL", "0:0")
    assert rows[lost.slurm_step_id][1:] == ("CANCELLED", "")
    jobcomp = (c.root / JOBCOMP_LOG.lstrip("/")).read_text()
    assert f"JobId={lost.slurm_job_id} " in jobcomp and "JobState=NODE_FAIL" in jobcomp
    logs = list((slurm.shared_dir / "runs" / job_name(run_dir.name)).glob("*.srun.log"))
    lost_log = next(p for p in logs if f"Node failure on {victim.name}" in p.read_text())
    assert lost_log.with_name(lost_log.name.replace(".srun.log", ".srun.rc")).read_text() == "0\n"
    print(f"\nkilled node: the sweep ended {took:.1f} s later")
