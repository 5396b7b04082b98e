"""Faults on a real Slurm 22.05: what the scheduler reports when a compute host dies mid-step, a
step's server exits, or an allocation runs out of time, and what a sweeper can read of it without
slurmdbd (scontrol's record, the jobcomp log, srun's log and exit status).

Root + the Slurm packages only. The node-death test boots its own cluster (it kills one host).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import slurm_commands as cmd
from tests import testhosts
from tests.slurm_cluster import (
    JOBCOMP_LOG,
    SlurmCluster,
    boot_slurm_cluster,
    node_states,
    shutdown_slurm_cluster,
    skip_reason,
)
from tests.slurm_helpers import (
    allocate,
    cancel_run,
    http_server_argv,
    job_line,
    node_address,
    ok,
    port_open,
    show_job,
    start_step,
    until,
    wait_running,
)
from tests.testhost_cluster import cluster_leftovers

PORT = 18432


@pytest.fixture
def own_cluster() -> Iterator[SlurmCluster]:
    """A cluster for this test alone; the test shuts it down itself (to check for leftovers)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = boot_slurm_cluster()
    try:
        yield cluster
    finally:
        shutdown_slurm_cluster(cluster)


def test_a_compute_host_killed_mid_step(own_cluster: SlurmCluster) -> None:
    slurm = own_cluster
    run = uuid.uuid4().hex[:8]
    victim, survivor = slurm.nodes[1], slurm.nodes[0]
    job = allocate(slurm, run, extra=(f"--nodelist={victim.name}",))
    assert wait_running(slurm, job) == victim.name
    files, _ = start_step(
        slurm, job, f"sweeper-{run}-c0", http_server_argv(node_address(slurm, victim.name), PORT)
    )
    until(lambda: port_open(victim.address, PORT), 30, "server listening")

    killed_at = time.monotonic()
    testhosts.kill_whole(victim)
    until(lambda: node_states(slurm)[victim.name].startswith("down"), 120, "node DOWN", 0.5)
    down_after = time.monotonic() - killed_at

    record = until(
        lambda: (r := show_job(slurm, job))["JobState"] == "NODE_FAIL" and r, 60, "NODE_FAIL"
    )
    assert record["Reason"] == "NodeDown"
    assert record["ExitCode"] == "0:0"  # the state is the reason; there is no exit status
    node = ok(slurm.run(["scontrol", "show", "node", "-o", victim.name]))
    assert "Reason=Not responding" in node
    # Pitfall: srun exits 0 when the node dies under it; only its log and the job say so.
    assert until(lambda: _read(files.srun_rc), 30, "srun rc").strip() == "0"
    assert f"Node failure on {victim.name}" in _read(files.srun_log)
    jobcomp = (slurm.controller.root / JOBCOMP_LOG.lstrip("/")).read_text()
    assert f"JobId={job} " in jobcomp and "JobState=NODE_FAIL" in jobcomp
    assert ok(slurm.run(cmd.run_jobs_argv(run))).strip() == ""  # the failed job left the queue

    # The survivor takes the next allocation; one that needs the dead node says so and waits.
    again = allocate(slurm, run)
    assert wait_running(slurm, again) == survivor.name
    stuck = allocate(slurm, run, extra=(f"--nodelist={victim.name}",))
    waiting = until(
        lambda: (line := job_line(slurm, stuck)).get("reason", "None") != "None" and line,
        30,
        "pending reason",
    )
    assert waiting["state"] == "PENDING"
    assert waiting["reason"].startswith("ReqNodeNotAvail"), waiting
    cancel_run(slurm, run)

    print(f"\nnode DOWN {down_after:.1f} s after the host was killed")
    shutdown_slurm_cluster(slurm)
    assert cluster_leftovers(slurm.cluster) == []


def test_a_server_that_exits_leaves_its_exit_code_and_the_allocation(
    slurm_cluster: SlurmCluster,
) -> None:
    run = uuid.uuid4().hex[:8]
    try:
        job = allocate(slurm_cluster, run)
        wait_running(slurm_cluster, job)
        files = cmd.step_files(str(slurm_cluster.shared_dir), f"sweeper-{run}-c0")
        srun = cmd.step_srun_argv(
            job, f"sweeper-{run}-c0", ["sh", "-c", "echo dying >&2; exit 3"], files, cpus=2
        )
        ok(slurm_cluster.login(cmd.background_line(srun, files)))
        assert until(lambda: _read(files.srun_rc), 30, "srun rc").strip() == "3"
        assert "task 0: Exited with exit code 3" in _read(files.srun_log)
        assert _read(files.stderr) == "dying\n"
        assert job_line(slurm_cluster, job)["state"] == "RUNNING"
        # No slurmdbd here: sacct cannot say anything (the reason we read scontrol and srun).
        sacct = slurm_cluster.run(["sacct", "-j", job])
        assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr
    finally:
        cancel_run(slurm_cluster, run)


def test_an_allocation_that_runs_out_of_time(slurm_cluster: SlurmCluster) -> None:
    """Slurm's limits are whole minutes and checked about every 30 s: this takes 60-90 s."""
    run = uuid.uuid4().hex[:8]
    try:
        job = allocate(slurm_cluster, run, time_limit="1")
        address = node_address(slurm_cluster, wait_running(slurm_cluster, job))
        left = cmd.time_left_seconds(job_line(slurm_cluster, job)["left"])
        assert left is not None and 50 <= left <= 60
        files, _ = start_step(
            slurm_cluster, job, f"sweeper-{run}-c0", http_server_argv(address, PORT)
        )
        record = until(
            lambda: (r := show_job(slurm_cluster, job))["JobState"] == "TIMEOUT" and r,
            150,
            "TIMEOUT",
            1.0,
        )
        assert record["Reason"] == "TimeLimit"
        assert "DUE TO TIME LIMIT" in until(lambda: _read(files.stderr), 30, "step stderr")
        assert until(lambda: _read(files.srun_rc), 30, "srun rc").strip() != "0"
    finally:
        cancel_run(slurm_cluster, run)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return ""
