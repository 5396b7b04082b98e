"""Bench: what Slurm costs the sweeper per worker and per point, next to the systemd path, in one
run on one machine.

Boots the test Slurm cluster (root + Slurm packages; see tests/slurm_cluster.py) and, over one
reused paramiko connection to the login host (as the sweeper's SSHHost keeps it), measures:
  - cluster boot (until both nodes idle) and teardown;
  - submission to a running allocation (sbatch --parsable, then squeue every 50 ms);
  - per point: stop the previous server step (SIGTERM, until squeue no longer lists it), launch
    the next step in the background (srun --jobid ... &), until squeue lists it, until the server
    answers over HTTP from this machine, and the identity probe (srun --overlap on the node:
    scontrol listpids + /proc);
  - `scancel --name` until `squeue --name` is empty.
Then the same per-point cycle with the systemd unit service on the login host (a test host with
systemd: SystemdService stop + start with its InvocationID/MainPID proof), same stand-in server.
The server's own start-up (Python exec to listening) is inside both "until it answers" figures.

Run: `sudo .venv/bin/python bench/slurm_orchestration.py [--points 8]`.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.hosts import slurm_commands as cmd  # noqa: E402
from sweeper.hosts.ssh import SSHHost, SSHTarget  # noqa: E402
from sweeper.services import Launch  # noqa: E402
from sweeper.services.systemd import SystemdService  # noqa: E402
from tests import slurm_cluster  # noqa: E402
from tests.slurm_helpers import probe_argv  # noqa: E402

PORT = 18950
SERVER = """
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), Ok).serve_forever()
"""


def poll(probe: Callable[[], object], timeout: float = 60.0, step: float = 0.05) -> float:
    """Seconds until probe() is truthy."""
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > timeout:
            raise TimeoutError("bench step did not complete")
        time.sleep(step)
    return time.monotonic() - started


def job_gone(host: SSHHost, job: str) -> bool:
    return not host.run(["squeue", "-h", "-j", job], check=False).stdout.strip()


def step_gone(host: SSHHost, job: str, step: str) -> bool:
    return step not in cmd.parse_steps(host.run(cmd.steps_argv(job)).stdout).values()


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--allocations", type=int, default=5)
    args = parser.parse_args()
    reason = slurm_cluster.skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    started = time.monotonic()
    cluster = slurm_cluster.boot_slurm_cluster()
    boot_s = time.monotonic() - started
    print(f"slurm cluster boot (3 hosts, until both nodes idle): {boot_s:.2f} s")
    login = cluster.controller
    target = SSHTarget(login.address, 22, "root", (login.key_file,), None, cluster.known_hosts)
    host = SSHHost("login", target)
    try:
        host.run(["true"])
        slurm_figures(host, cluster, args.allocations, args.points)
        systemd_figures(host, args.points)
    finally:
        host.close()
        started = time.monotonic()
        slurm_cluster.shutdown_slurm_cluster(cluster)
        print(f"slurm cluster teardown: {time.monotonic() - started:.2f} s")
    return 0


def slurm_figures(host: SSHHost, cluster: slurm_cluster.SlurmCluster, allocs: int, n: int) -> None:
    run = uuid.uuid4().hex[:8]
    shared = str(cluster.shared_dir)

    def allocate() -> tuple[str, float]:
        t0 = time.monotonic()
        options = cmd.AllocationOptions(time_limit="30", gpus_per_node=2)
        argv = cmd.allocate_argv(run, options, output=f"{shared}/alloc-%j.out")
        job = cmd.parse_job_id(host.run(argv).stdout)
        poll(lambda: host.run(cmd.job_argv(job)).stdout.startswith("RUNNING|"))
        return job, time.monotonic() - t0

    waits = []
    for _ in range(allocs):
        job, waited = allocate()
        waits.append(waited)
        host.run(["scancel", job])
        poll(functools.partial(job_gone, host, job))
    print(
        f"sbatch to RUNNING on an idle cluster (n={allocs}): median "
        f"{statistics.median(waits):.2f} s, min {min(waits):.2f}, max {max(waits):.2f}"
    )

    job, _ = allocate()
    node = host.run(cmd.job_argv(job)).stdout.split("|")[2]
    address = host.run(["getent", "hosts", node]).stdout.split()[0]
    url = f"http://{address}:{PORT}/"
    rows = []
    previous: str | None = None
    for i in range(n + 1):
        name = f"sweeper-{run}-c{i}"
        files = cmd.step_files(shared, name)
        t0 = time.monotonic()
        if previous:
            host.run(cmd.stop_step_argv(previous))
            poll(functools.partial(step_gone, host, job, previous))
        t1 = time.monotonic()
        argv = ["/usr/bin/python3", "-c", SERVER, address, str(PORT)]
        srun = cmd.step_srun_argv(job, name, argv, files, cpus=2, gpus=2)
        host.run(["sh", "-c", cmd.background_line(srun, files)])
        step = ""

        def listed(step_name: str = name) -> bool:
            nonlocal step
            step = cmd.parse_steps(host.run(cmd.steps_argv(job)).stdout).get(step_name, "")
            return bool(step)

        poll(listed)
        t2 = time.monotonic()
        poll(lambda: answers(url), step=0.02)
        t3 = time.monotonic()
        host.run(probe_argv(job, step, PORT, "/usr/bin/python3"))
        t4 = time.monotonic()
        if previous:  # the first launch has nothing to stop: not a restart
            rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
        previous = step
    stop, launch, answer, probe = (statistics.median(col) for col in zip(*rows, strict=True))
    print(f"slurm step restart per point (median of {n}, same allocation):")
    print(f"  SIGTERM step until squeue drops it     {stop:6.3f} s")
    print(f"  srun in background until step listed  {launch:6.3f} s")
    print(f"  until the server answers from here    {answer:6.3f} s")
    print(f"  identity probe (srun --overlap, /proc) {probe:6.3f} s")
    print(f"  restart to proven server: {stop + launch + answer + probe:.3f} s")
    t0 = time.monotonic()
    host.run(cmd.cancel_run_argv(run))
    poll(lambda: not host.run(cmd.run_jobs_argv(run)).stdout.strip())
    print(f"scancel --name until squeue --name is empty: {time.monotonic() - t0:.2f} s")


def systemd_figures(host: SSHHost, n: int) -> None:
    service = SystemdService(host, unit="bench-slurm-compare", remote_root="/opt/bench")
    rows = []
    url = f"http://127.0.0.1:{PORT + 1}/"
    with host.open_tunnel(PORT + 1) as local:
        url = f"http://127.0.0.1:{local}/"
        for i in range(n + 1):
            launch = Launch(
                argv=("/usr/bin/python3", "-c", SERVER, "127.0.0.1", str(PORT + 1)),
                port=PORT + 1,
                launch_id=uuid.uuid4().hex[:12],
                env={"BENCH_POINT": str(i)},
            )
            t0 = time.monotonic()
            service.stop()
            t1 = time.monotonic()
            service.start(launch)
            t2 = time.monotonic()
            poll(lambda: answers(url), step=0.02)
            t3 = time.monotonic()
            if i:
                rows.append((t1 - t0, t2 - t1, t3 - t2))
    service.stop()
    service.remove()
    stop, start, answer = (statistics.median(col) for col in zip(*rows, strict=True))
    print(f"systemd unit restart per point on the login host (median of {n}, SSH tunnel):")
    print(f"  stop previous unit + port free        {stop:6.3f} s")
    print(f"  install + restart + InvocationID/PID  {start:6.3f} s")
    print(f"  until the server answers from here    {answer:6.3f} s")
    print(f"  restart to proven server: {stop + start + answer:.3f} s")


if __name__ == "__main__":
    raise SystemExit(main())
