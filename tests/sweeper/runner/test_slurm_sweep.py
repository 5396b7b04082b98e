"""`sweeper run` through a real Slurm 22.05 (tests/slurm_cluster.py: a login host and two compute
hosts), end to end through the CLI, with the real bundled runtime on tiny-random: a two-node
sweep, an allocation too short for the next config, a controller killed and resumed, Ctrl-C.
(A compute host killed mid-sweep: test_slurm_node_loss.py.)

Root + the Slurm packages only; skips with the reason elsewhere.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import pytest

from tests.slurm_cluster import SlurmCluster
from tests.slurm_helpers import until
from tests.sweeper.slurm_sweep import (
    failures,
    interrupt,
    job_state,
    planned_and_confirming,
    points,
    recorded,
    run_dir_of,
    run_jobs,
    run_sweep,
    start_sweep,
    write_spec,
)

pytestmark = pytest.mark.slow


def test_a_two_node_sweep_is_exact_and_leaves_no_job(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    secret = "hunter2-" + "x" * 8  # reaches each server as HF_TOKEN, and nothing else
    spec = write_spec(
        tmp_path, "slurmtwo", slurm_cluster, port=18610, secrets={"HF_TOKEN": "${env:SLURM_T}"}
    )
    code, run_dir, stderr = run_sweep(spec, tmp_path / "results", env={"SLURM_T": secret})
    table = points(run_dir)
    assert code == 0, failures(table, stderr)
    plan, again = planned_and_confirming(table, run_dir)
    assert len(plan) == 6  # AR + 2 speculative configs, temperature {0, 0.7}
    assert (table.status == "ok").all()
    speculative = table[table["mode"] == "speculative"]
    assert len(speculative) == 4 + len(again) and set(speculative.determinism) == {"exact"}
    # (the AR baseline at temperature 0 is the reference itself: n/a)
    assert set(table[table["mode"] == "ar"].determinism) <= {"exact", "n/a"}
    # Each point names its allocation and its server's step; both nodes served.
    assert table.slurm_job_id.notna().all() and table.slurm_step_id.notna().all()
    steps = zip(table.slurm_job_id, table.slurm_step_id, strict=True)
    assert all(step.startswith(f"{job}.") for job, step in steps)
    assert table.groupby("server_config_id").slurm_step_id.nunique().eq(1).all()
    # One step per load: the three configs differ only in knobs the runtime switches, so each
    # allocation loads once and the config it runs next is switched in place in the same step.
    assert plan.slurm_job_id.nunique() == 2
    assert plan.groupby("slurm_job_id").slurm_step_id.nunique().eq(1).all()
    configs_per_step = plan.groupby("slurm_step_id").server_config_id.nunique()
    assert sorted(configs_per_step) == [1, 2]  # a load alone; a load and its switch
    # A switched winner is measured again on a fresh process: a step of its own.
    assert not set(again.slurm_step_id) & set(plan.slurm_step_id)
    assert set(plan.slurm_node) == {n.name for n in slurm_cluster.nodes}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    timings = manifest["timings"]
    confirmed = again.server_config_id.nunique()
    # (the plan's work done, its allocations are released: a confirmation queues for its own)
    assert timings["cluster.allocations"] == 2 + confirmed
    assert timings["cluster.loads"] == 2 + confirmed and timings["cluster.switches"] == 1
    served = sorted(proof["served_by"] for proof in manifest["identities"].values())
    assert served == sorted(["load", "load", "switch"] + ["load"] * confirmed)
    assert not [p["switch_refused"] for p in manifest["identities"].values() if p["switch_refused"]]
    assert "cluster.queue_s" in timings and "cluster.ready_s" in timings
    # A load proves its new process; a switch proves the same process as the load before it.
    said = {
        "load": "is new, runs the requested argv and environment",
        "switch": "is the process switched in place, runs the loaded argv and environment",
    }
    for label, proof in manifest["identities"].items():
        assert any(said[proof["served_by"]] in p for p in proof["proven"]), label
    # Each point's log is its own slice of its step's output.
    first = table.sort_values("started_at").iloc[0]
    assert "ddtree_runtime ready" in (run_dir / first.log_path).read_text()
    assert "queued" in stderr and "starting ar-cg0" in stderr  # queue waits apart from loads
    assert run_jobs(slurm_cluster, run_dir.name) == {}
    # The secret was proven in each server's environment (masked), and is written nowhere: not
    # in the shared directory (its 0600 file is gone with the step), not in the results.
    assert all("HF_TOKEN" not in " ".join(p["unproven"]) for p in manifest["identities"].values())
    shared = [p for p in slurm_cluster.shared_dir.rglob("*") if p.is_file()]
    assert shared and not [p for p in shared if p.suffix == ".env"]
    for path in [*shared, *(p for p in run_dir.rglob("*") if p.is_file())]:
        assert secret.encode() not in path.read_bytes(), path


def test_a_refused_allocation_fails_every_point_with_sbatchs_words(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, "slurmrefused", slurm_cluster, port=18615, partition="nope")
    code, run_dir, stderr = run_sweep(spec, tmp_path / "results")
    table = points(run_dir)
    assert code == 3, stderr[-3000:]
    assert len(table) == 6 and (table.status == "failed").all()
    assert table.reason.str.contains("sbatch refused the allocation").all()
    assert table.reason.str.contains("Invalid partition name specified").all()
    assert run_jobs(slurm_cluster, run_dir.name) == {}


def test_an_allocation_too_short_for_the_next_config_is_replaced_before_it(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """The first allocation's limit is cut to one minute while it serves the AR baseline: the
    next config would end inside it, so it is cancelled and replaced before that config starts."""
    spec = write_spec(tmp_path, "slurmshort", slurm_cluster, port=18620, temperature=(0,))
    spec.write_text(spec.read_text().replace("allocations: 2", "allocations: 1"))
    results = tmp_path / "results"
    shortened: list[str] = []

    def shorten() -> None:
        def running() -> str | None:
            run_dir = run_dir_of(results, "slurmshort")
            jobs = run_jobs(slurm_cluster, run_dir.name) if run_dir else {}
            return next((j for j, state in jobs.items() if state == "RUNNING"), None)

        job = until(running, 60, "the first allocation running")
        update = slurm_cluster.run(["scontrol", "update", f"JobId={job}", "TimeLimit=1"])
        assert update.returncode == 0, update.stderr
        shortened.append(job)

    shortener = threading.Thread(target=shorten)
    shortener.start()
    code, run_dir, stderr = run_sweep(spec, results)
    shortener.join()
    table = points(run_dir).sort_values("started_at")
    assert code == 0, failures(table, stderr)
    plan, _ = planned_and_confirming(table, run_dir)
    assert (table.status == "ok").all() and len(plan) == 3
    first = shortened[0]
    assert list(plan.slurm_job_id) == [first] + [plan.slurm_job_id.iloc[1]] * 2
    assert plan.slurm_job_id.iloc[1] != first
    assert "replacing the allocation before it starts" in stderr
    assert job_state(slurm_cluster, first) == "CANCELLED"  # by the sweeper, not TIMEOUT
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["timings"]["cluster.replaced_short"] == 1
    assert run_jobs(slurm_cluster, run_dir.name) == {}


def test_a_killed_controller_resumes_without_duplicates_or_orphan_jobs(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, "slurmkill", slurm_cluster, port=18630)
    results = tmp_path / "results"
    proc = start_sweep(spec, results, tmp_path / "first.log")
    try:
        until(lambda: len(recorded(run_dir_of(results, "slurmkill"))) >= 2, 240, "AR points")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    run_dir = run_dir_of(results, "slurmkill")
    assert run_dir is not None
    before = len(recorded(run_dir))
    orphans = run_jobs(slurm_cluster, run_dir.name)
    assert orphans, "the killed controller left no job: nothing for the resume to clean"
    code, resumed, stderr = run_sweep(spec, results, "--resume-latest")
    assert resumed == run_dir
    table = points(run_dir)
    assert code == 0, failures(table, stderr)
    lines = [p["point_id"] for p in recorded(run_dir)]
    plan, again = planned_and_confirming(table, run_dir)
    assert len(lines) == len(set(lines)) == len(plan) + len(again) and len(plan) == 6  # each once
    assert (table.status == "ok").all()
    assert "cancelled the run's jobs left from before" in stderr
    for job in orphans:
        assert job in stderr and job_state(slurm_cluster, job) == "CANCELLED"
    resumed_jobs = {p["slurm_job_id"] for p in recorded(run_dir)[before:]}
    assert resumed_jobs and not resumed_jobs & set(orphans)  # new allocations for the rest
    assert run_jobs(slurm_cluster, run_dir.name) == {}


def test_ctrl_c_exits_130_and_leaves_no_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "slurmint", slurm_cluster, port=18640)
    results = tmp_path / "results"
    proc = start_sweep(spec, results, tmp_path / "run.log")
    try:
        until(lambda: recorded(run_dir_of(results, "slurmint")), 240, "a first point")
        run_dir = run_dir_of(results, "slurmint")
        assert run_dir is not None and run_jobs(slurm_cluster, run_dir.name)
        code, took = interrupt(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "run.log").read_text()
    assert code == 130, log[-3000:]
    assert run_jobs(slurm_cluster, run_dir.name) == {}, f"jobs left {took:.1f} s after Ctrl-C"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert f"resume with: sweeper run {spec} --resume {run_dir}" in log
    print(f"\nCtrl-C to exit with no job left: {took:.2f} s")
