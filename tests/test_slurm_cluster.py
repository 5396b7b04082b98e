"""A real Slurm 22.05 on test hosts, and the mechanisms a sweeper `slurm` host relies on, driven
over SSH through the login host exactly as sweeper/hosts/slurm_commands.py builds them: a holding
allocation per worker, server steps launched without blocking, reached directly and through an
SSH tunnel, their identity read from the node's /proc, restarts, cleanup by name, queue waits.

Root + the Slurm packages only (skips with the reason elsewhere); faults are in
tests/test_slurm_faults.py.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import httpx

from sweeper.hosts import slurm_commands as cmd
from sweeper.hosts.ssh import SSHHost, SSHTarget
from tests.slurm_cluster import GPUS_PER_NODE, SlurmCluster, node_states
from tests.slurm_helpers import (
    PYTHON,
    allocate,
    cancel_run,
    free_port,
    http_server_argv,
    job_line,
    node_address,
    ok,
    port_open,
    probe,
    read_or_empty,
    show_job,
    start_step,
    step_id_of,
    until,
    wait_running,
)

PORT = 18431


def new_run() -> str:
    return uuid.uuid4().hex[:8]


def test_roles_each_host_runs_only_its_daemons(slurm_cluster: SlurmCluster) -> None:
    assert set(node_states(slurm_cluster).values()) == {"idle"}
    expected = {slurm_cluster.controller.name: ("active", "masked")}
    expected |= {node.name: ("masked", "active") for node in slurm_cluster.nodes}
    for host in (slurm_cluster.controller, *slurm_cluster.nodes):
        ctld, slurmd = expected[host.name]
        state = {
            unit: host.exec(["systemctl", "is-active", unit]).stdout.strip()
            for unit in ("munge.service", "slurmctld.service", "slurmd.service")
        }
        enabled = {
            unit: host.exec(["systemctl", "is-enabled", unit]).stdout.strip()
            for unit in ("slurmctld.service", "slurmd.service")
        }
        assert state["munge.service"] == "active", host.name
        assert (ctld == "active") == (state["slurmctld.service"] == "active"), host.name
        assert (slurmd == "active") == (state["slurmd.service"] == "active"), host.name
        masked = "slurmd.service" if ctld == "active" else "slurmctld.service"
        assert enabled[masked] == "masked", host.name
        hosts_file = (host.root / "etc/hosts").read_text()
        for other in (slurm_cluster.controller, *slurm_cluster.nodes):
            assert f"{other.address} {other.name}" in hosts_file


def test_shared_directory_is_the_same_on_every_host(slurm_cluster: SlurmCluster) -> None:
    name = f"probe-{new_run()}"
    node = slurm_cluster.nodes[1]
    assert (
        node.exec(["sh", "-c", f"echo from-node > {slurm_cluster.shared_dir}/{name}"]).returncode
        == 0
    )
    assert (slurm_cluster.shared_dir / name).read_text() == "from-node\n"
    assert ok(slurm_cluster.run(["cat", f"{slurm_cluster.shared_dir}/{name}"])) == "from-node\n"


def test_login_refuses_a_wrong_host_key(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    wrong = tmp_path / "known_hosts"
    node_key = slurm_cluster.nodes[0].host_key_line
    wrong.write_text(f"{slurm_cluster.controller.address} {node_key}\n")
    argv = [
        f"UserKnownHostsFile={wrong}" if a.startswith("UserKnownHostsFile=") else a
        for a in slurm_cluster.login_argv(["true"])
    ]
    assert subprocess.run(argv, capture_output=True, timeout=30).returncode == 255


def test_allocation_holds_one_whole_node_named_for_the_run(slurm_cluster: SlurmCluster) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run)
        node = wait_running(slurm_cluster, job)
        assert node in {n.name for n in slurm_cluster.nodes}
        assert ok(slurm_cluster.run(cmd.run_jobs_argv(run))).split() == [f"{job}|RUNNING"]
        record = show_job(slurm_cluster, job)
        assert record["JobName"] == cmd.job_name(run)
        assert record["NumNodes"] == "1"
        assert record["Requeue"] == "0"
        assert record["TresPerNode"] == f"gres:gpu:{GPUS_PER_NODE}"
        states = node_states(slurm_cluster)
        assert states[node] == "allocated"
        assert sorted(states.values()) == ["allocated", "idle"]
    finally:
        cancel_run(slurm_cluster, run)


def _login_tunnel(
    slurm: SlurmCluster, address: str, port: int
) -> tuple[int, subprocess.Popen[str]]:
    """`ssh -N -L local:address:port` through the login host, listening; returns (local, proc).

    The free local port is only free when looked at: another process may take it before ssh binds
    it, and ssh then exits (ExitOnForwardFailure). That is a lost race, not the product's failure:
    try another port. A login that is merely slow (a loaded machine) is waited for."""
    said: list[str] = []
    for _ in range(3):
        local = free_port()
        tunnel = subprocess.Popen(
            slurm.login_argv(
                [], "-N", "-o", "ExitOnForwardFailure=yes", "-L", f"{local}:{address}:{port}"
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

        def settled(local: int = local, tunnel: subprocess.Popen[str] = tunnel) -> bool:
            return port_open("127.0.0.1", local) or tunnel.poll() is not None

        until(settled, 30, "ssh -L listening or exited")
        if tunnel.poll() is None:
            return local, tunnel
        said.append(f"exit {tunnel.returncode}: {tunnel.communicate(timeout=10)[1].strip()}")
    raise AssertionError(f"ssh -L exited before listening, 3 times: {said}")


def test_server_step_reachable_directly_and_through_a_login_tunnel(
    slurm_cluster: SlurmCluster,
) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run)
        node = wait_running(slurm_cluster, job)
        address = node_address(slurm_cluster, node)
        assert address == next(n.address for n in slurm_cluster.nodes if n.name == node)
        env = {"PYTHONUNBUFFERED": "1"}
        files, step = start_step(
            slurm_cluster, job, f"sweeper-{run}-c0", http_server_argv(address, PORT), env
        )
        # The SSH command that launched it has returned; the step goes on serving.
        until(lambda: port_open(address, PORT), 30, "server listening")
        assert httpx.get(f"http://{address}:{PORT}/", timeout=30).status_code == 200
        local, tunnel = _login_tunnel(slurm_cluster, address, PORT)
        try:
            assert httpx.get(f"http://127.0.0.1:{local}/", timeout=30).status_code == 200
        finally:
            # How ssh winds down is not under test; a loaded machine has kept a SIGTERMed
            # `ssh -N` past 10 s. SIGKILL ends it at once.
            tunnel.kill()
            tunnel.communicate(timeout=30)
        assert step_id_of(slurm_cluster, job, f"sweeper-{run}-c0") == step
        # stdout and stderr (one file), written on the node, read here from the shared directory.
        assert f"Serving HTTP on {address} port {PORT}" in Path(files.output).read_text()
        access = Path(files.output).read_text()
        assert f"{slurm_cluster.gateway} - - " in access  # direct, from this machine
        assert f"{slurm_cluster.controller.address} - - " in access  # tunnel: from the login host
    finally:
        cancel_run(slurm_cluster, run)


def test_probe_reads_the_step_pid_cmdline_env_and_listening_socket(
    slurm_cluster: SlurmCluster,
) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run)
        address = node_address(slurm_cluster, wait_running(slurm_cluster, job))
        argv = http_server_argv(address, PORT)
        env = {"SWEEPER_LAUNCH_ID": f"launch-{run}", "SECRET_TOKEN": "hunter2"}
        _, step = start_step(slurm_cluster, job, f"sweeper-{run}-c0", argv, env)
        until(lambda: port_open(address, PORT), 30, "server listening")
        seen = probe(slurm_cluster, job, step, PORT, ("SWEEPER_LAUNCH_ID",))
        assert len(seen["roots"]) == 1
        pid = seen["roots"][0]
        proc = seen["procs"][str(pid)]
        assert proc["cmdline"] == argv  # `env K=V` exec'd: the pid is the server's
        assert proc["env"] == {
            "SLURM_JOB_ID": job,
            "SLURM_STEP_ID": step.split(".")[1],
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(GPUS_PER_NODE)),
            "SWEEPER_LAUNCH_ID": f"launch-{run}",
        }  # only the keys asked for: SECRET_TOKEN never leaves the node
        assert seen["listeners"] == [pid]
    finally:
        cancel_run(slurm_cluster, run)


def test_restart_ends_the_step_and_starts_a_new_one_in_the_same_allocation(
    slurm_cluster: SlurmCluster,
) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run)
        address = node_address(slurm_cluster, wait_running(slurm_cluster, job))
        first_files, first = start_step(
            slurm_cluster, job, f"sweeper-{run}-c0", http_server_argv(address, PORT)
        )
        until(lambda: port_open(address, PORT), 30, "first server listening")
        first_pid = probe(slurm_cluster, job, first, PORT)["roots"][0]
        ok(slurm_cluster.run(cmd.stop_step_argv(first)))
        until(lambda: not step_id_of(slurm_cluster, job, f"sweeper-{run}-c0"), 30, "step gone")
        second_files, second = start_step(
            slurm_cluster, job, f"sweeper-{run}-c1", http_server_argv(address, PORT)
        )
        until(lambda: port_open(address, PORT), 30, "second server listening")
        assert second.split(".")[0] == first.split(".")[0] == job
        assert int(second.split(".")[1]) > int(first.split(".")[1])
        seen = probe(slurm_cluster, job, second, PORT)
        assert seen["listeners"] == seen["roots"] != [first_pid]
        # the first step's srun ended and said how: SIGTERM'd task
        rc = until(lambda: read_or_empty(first_files.srun_rc), 10, "first srun rc")
        assert rc.strip() != "0"
        assert "task 0: Terminated" in Path(first_files.srun_log).read_text()
        assert job_line(slurm_cluster, job)["state"] == "RUNNING"  # the allocation stays
    finally:
        cancel_run(slurm_cluster, run)


def test_a_new_server_step_waits_until_the_previous_one_has_exited(
    slurm_cluster: SlurmCluster,
) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run)
        wait_running(slurm_cluster, job)
        slow_exit = [
            "bash",
            "-c",
            'trap "sleep 2; echo bye; exit 0" TERM; echo up; while :; do sleep 0.1; done',
        ]
        files, step = start_step(slurm_cluster, job, f"sweeper-{run}-slow", slow_exit)
        until(lambda: "up" in read_or_empty(files.output), 20, "slow step up")
        ok(slurm_cluster.run(cmd.stop_step_argv(step)))
        # A second step wanting the same CPUs and GPUs (foreground srun) must wait for it.
        next_files = cmd.step_files(str(slurm_cluster.shared_dir), f"sweeper-{run}-next")
        srun = cmd.step_srun_argv(
            job,
            f"sweeper-{run}-next",
            ["cat", files.output],
            next_files,
            cpus=2,
            gpus=GPUS_PER_NODE,
        )
        waited = slurm_cluster.run(srun, timeout=60)
        assert waited.returncode == 0, waited.stderr
        assert "Requested nodes are busy" in waited.stderr
        seen = Path(next_files.output).read_text()  # it ran after the old one's exit:
        assert seen.startswith("up\n") and seen.endswith("\nbye\n"), seen
        assert "CANCELLED" in seen  # slurmstepd's words, in order with the step's own
    finally:
        cancel_run(slurm_cluster, run)


def test_scancel_by_name_ends_running_and_pending_jobs(slurm_cluster: SlurmCluster) -> None:
    run = new_run()
    try:
        jobs = [allocate(slurm_cluster, run) for _ in range(3)]
        for job in jobs[:2]:
            wait_running(slurm_cluster, job)
        # No third node: the queue says the job waits, and why.
        waiting = job_line(slurm_cluster, jobs[2])
        assert waiting["state"] == "PENDING"
        assert waiting["reason"] in ("Resources", "Priority")
        cancel_run(slurm_cluster, run)
        for job in jobs:
            assert show_job(slurm_cluster, job)["JobState"] == "CANCELLED"
    finally:
        cancel_run(slurm_cluster, run)


def test_time_left_of_an_allocation(slurm_cluster: SlurmCluster) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run, time_limit="90")
        wait_running(slurm_cluster, job)
        left = cmd.time_left_seconds(job_line(slurm_cluster, job)["left"])
        assert left is not None and 89 * 60 <= left <= 90 * 60
    finally:
        cancel_run(slurm_cluster, run)


def test_a_request_no_node_can_meet_is_refused_at_submission(slurm_cluster: SlurmCluster) -> None:
    options = cmd.AllocationOptions(time_limit="5", gpus_per_node=GPUS_PER_NODE + 1)
    argv = cmd.allocate_argv(new_run(), options, output="/dev/null")
    refused = slurm_cluster.run(argv)
    assert refused.returncode == 1
    assert "Requested node configuration is not available" in refused.stderr


def test_the_venv_python_runs_on_a_node(slurm_cluster: SlurmCluster) -> None:
    run = new_run()
    try:
        job = allocate(slurm_cluster, run)
        wait_running(slurm_cluster, job)
        argv = ["srun", f"--jobid={job}", "--ntasks=1", PYTHON, "-c"]
        argv.append("import sys, httpx, pydantic; print(sys.executable)")
        assert ok(slurm_cluster.run(argv)).strip() == PYTHON
    finally:
        cancel_run(slurm_cluster, run)


def test_the_sweepers_ssh_host_drives_the_login_host(slurm_cluster: SlurmCluster) -> None:
    login = slurm_cluster.controller
    target = SSHTarget(
        hostname=login.address,
        user=login.user,
        key_files=(login.key_file,),
        known_hosts=slurm_cluster.known_hosts,
    )
    host = SSHHost(login.name, target)
    run = new_run()
    try:
        argv = cmd.allocate_argv(run, cmd.AllocationOptions(time_limit="5"), output="/dev/null")
        job = cmd.parse_job_id(host.run(argv).stdout)
        wait_running(slurm_cluster, job)
        assert host.run(cmd.run_jobs_argv(run)).stdout.split() == [f"{job}|RUNNING"]
        host.run(cmd.cancel_run_argv(run))
    finally:
        host.close()
        cancel_run(slurm_cluster, run)
