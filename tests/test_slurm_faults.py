"""Faults on a real Slurm 22.05: what the scheduler reports when a compute host dies mid-step or a
step's server exits, and what a sweeper can read of it without slurmdbd (scontrol's record, the
jobcomp log, srun's log and exit status). An allocation running out of time is not provoked
here (whole-minute limits enforced every ~30 s: 60-90 s of CI): the sweeper replaces an
allocation before a config it cannot fit (tests/sweeper/runner/test_slurm_sweep.py), and one that
ends anyway is a lost allocation like a dead node's.

Root + the Slurm packages only. The node-death test boots its own cluster, with slurmdbd (it
kills one host and compares what scontrol, srun and sacct then say).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from sweeper.hosts import slurm_commands as cmd
from tests import testhosts
from tests.slurm_cluster import (
    JOBCOMP_LOG,
    SlurmCluster,
    accounting_cluster,
    node_states,
    shutdown_slurm_cluster,
)
from tests.slurm_helpers import (
    allocate,
    cancel_run,
    http_server_argv,
    job_line,
    node_address,
    ok,
    port_open,
    read_or_empty,
    start_step,
    until,
    wait_job_state,
    wait_running,
)
from tests.testhost_cluster import cluster_leftovers

PORT = 18432


@pytest.fixture
def own_cluster() -> Iterator[SlurmCluster]:
    """A cluster with slurmdbd for this test alone (it kills a host and checks the teardown)."""
    with accounting_cluster() as cluster:
        yield cluster


@pytest.mark.root
def test_a_compute_host_killed_mid_step(own_cluster: SlurmCluster) -> None:
    slurm = own_cluster
    run = uuid.uuid4().hex[:8]
    victim, survivor = slurm.nodes[1], slurm.nodes[0]
    job = allocate(slurm, run, extra=(f"--nodelist={victim.name}",))
    assert wait_running(slurm, job) == victim.name
    # Two ended steps first, for sacct's per-step view: one exits 3, one is SIGTERM'd.
    failed = slurm.run(["srun", f"--jobid={job}", "--job-name=exits3", "sh", "-c", "exit 3"])
    assert failed.returncode == 3
    termed, termed_id = start_step(slurm, job, f"sweeper-{run}-term", ["sleep", "1000"])
    ok(slurm.run(cmd.stop_step_argv(termed_id)))
    until(lambda: read_or_empty(termed.srun_rc), 30, "TERM'd step ended")
    files, server = start_step(
        slurm, job, f"sweeper-{run}-c0", http_server_argv(node_address(slurm, victim.name), PORT)
    )
    until(lambda: port_open(victim.address, PORT), 30, "server listening")

    killed_at = time.monotonic()
    testhosts.kill_whole(victim)
    until(lambda: node_states(slurm)[victim.name].startswith("down"), 120, "node DOWN", 0.5)
    down_after = time.monotonic() - killed_at

    # scontrol (any site): the job's state and reason; no exit status.
    record = wait_job_state(slurm, job, "NODE_FAIL", 60)
    assert record["Reason"] == "NodeDown"
    assert record["ExitCode"] == "0:0"
    node = ok(slurm.run(["scontrol", "show", "node", "-o", victim.name]))
    assert "Reason=Not responding" in node
    # Pitfall: srun exits 0 when the node dies under it; only its log and the job say so.
    assert until(lambda: read_or_empty(files.srun_rc), 30, "srun rc").strip() == "0"
    assert f"Node failure on {victim.name}" in read_or_empty(files.srun_log)
    jobcomp = (slurm.controller.root / JOBCOMP_LOG.lstrip("/")).read_text()
    assert f"JobId={job} " in jobcomp and "JobState=NODE_FAIL" in jobcomp
    # sacct (sites with slurmdbd): the same job state, and each step's own end.
    rows = until(lambda: _sacct_when(slurm, job, "NODE_FAIL"), 30, "sacct NODE_FAIL")
    assert rows[job] == (cmd.job_name(run), "NODE_FAIL", "0:0")
    steps = {name: (state, code) for step, (name, state, code) in rows.items() if step != job}
    assert steps["exits3"] == ("FAILED", "3:0")
    assert steps[f"sweeper-{run}-term"] == ("CANCELLED", "0:15")
    assert steps[f"sweeper-{run}-c0"] == ("CANCELLED", "")  # the server: no code of its own
    assert rows[server][0] == f"sweeper-{run}-c0"
    assert ok(slurm.run(cmd.run_jobs_argv(run))).strip() == ""  # the failed job left the queue

    # The survivor takes the next allocation; one that needs the dead node says so and waits.
    again = allocate(slurm, run)
    assert wait_running(slurm, again) == survivor.name
    stuck = allocate(slurm, run, extra=(f"--nodelist={victim.name}",))
    waiting = until(lambda: _with_reason(job_line(slurm, stuck)), 30, "pending reason")
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
        assert until(lambda: read_or_empty(files.srun_rc), 30, "srun rc").strip() == "3"
        assert "task 0: Exited with exit code 3" in read_or_empty(files.srun_log)
        assert read_or_empty(files.output) == "dying\n"
        assert job_line(slurm_cluster, job)["state"] == "RUNNING"
        # No slurmdbd here: sacct cannot say anything (the reason we read scontrol and srun).
        sacct = slurm_cluster.run(["sacct", "-j", job])
        assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr
    finally:
        cancel_run(slurm_cluster, run)


def _sacct_when(slurm: SlurmCluster, job: str, state: str) -> dict[str, tuple[str, str, str]]:
    """sacct's rows for the job once it records the job in `state` ({} before)."""
    rows = cmd.parse_sacct(ok(slurm.run(cmd.sacct_argv(job))))
    return rows if rows.get(job, ("", "", ""))[1] == state else {}


def _with_reason(line: dict[str, str]) -> dict[str, str] | None:
    """The squeue line once the scheduler has given the job a reason."""
    return line if line.get("reason", "None") != "None" else None
