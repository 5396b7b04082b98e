"""Helpers for the Slurm tests: run the product's command lines (sweeper/hosts/slurm_commands.py)
on the login host of a test cluster and wait for what they promise (a running allocation, a
listed step, a listening server). Failures carry Slurm's own words (stderr, state, reason).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sweeper.hosts import slurm_commands as cmd
from tests.slurm_cluster import CPUS_PER_NODE, GPUS_PER_NODE, PARTITION, SlurmCluster

T = TypeVar("T")

#: Every wait below is an upper bound; its figure is what a quiet machine needs, and a loaded one
#: (CI beside other work, or two CPU-burning processes) is given this many times as long. A wait
#: that succeeds returns at once, so only a real failure pays for the patience.
PATIENCE = 4.0

#: The Python that runs the tests exists on every test host (overlay of this machine's /).
PYTHON = sys.executable


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    """stdout of a command that must succeed."""
    assert proc.returncode == 0, f"{proc.args!r} exited {proc.returncode}: {proc.stderr.strip()}"
    return proc.stdout


def until(probe: Callable[[], T | None], timeout: float, what: str, step: float = 0.1) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout` s (times
    PATIENCE)."""
    timeout *= PATIENCE
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s (last: {value!r})")
        time.sleep(step)


def read_or_empty(path: str) -> str:
    """A file's text, or "" while it does not exist yet."""
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return ""


def allocate(
    slurm: SlurmCluster, run_id: str, *, time_limit: str = "30", extra: tuple[str, ...] = ()
) -> str:
    """Submit a holding allocation for the run; returns the job id (it may still be pending)."""
    options = cmd.AllocationOptions(
        time_limit=time_limit, gpus_per_node=GPUS_PER_NODE, partition=PARTITION, extra=extra
    )
    argv = cmd.allocate_argv(
        run_id, options, output=f"{slurm.shared_dir}/{cmd.job_name(run_id)}-%j.out"
    )
    return cmd.parse_job_id(ok(slurm.run(argv)))


def job_line(slurm: SlurmCluster, job: str) -> dict[str, str]:
    """squeue's state, reason, node and time left for a job it still lists ({} otherwise)."""
    line = slurm.run(cmd.job_argv(job)).stdout.strip()
    if not line:
        return {}
    state, reason, node, left = line.split("|")
    return {"state": state, "reason": reason, "node": node, "left": left}


def wait_running(slurm: SlurmCluster, job: str, timeout: float = 30.0) -> str:
    """Wait for the allocation to run; returns its node."""

    def node() -> str | None:
        line = job_line(slurm, job)
        return line["node"] if line.get("state") == "RUNNING" else None

    return until(node, timeout, f"job {job} running")


def wait_job_state(
    slurm: SlurmCluster, job: str, state: str, timeout: float, step: float = 0.5
) -> dict[str, str]:
    """Wait until the controller records the job in `state`; returns that record."""

    def record() -> dict[str, str] | None:
        fields = show_job(slurm, job)
        return fields if fields.get("JobState") == state else None

    return until(record, timeout, f"job {job} {state}", step)


def show_job(slurm: SlurmCluster, job: str) -> dict[str, str]:
    """The controller's record of the job (scontrol show job -o)."""
    return cmd.parse_show_job(ok(slurm.run(cmd.show_job_argv(job))))


def node_address(slurm: SlurmCluster, node: str) -> str:
    """The node's address as the login host resolves it (where the server must bind)."""
    return ok(slurm.run(["getent", "hosts", node])).split()[0]


def step_id_of(slurm: SlurmCluster, job: str, step_name: str) -> str | None:
    """The id of the job's running step called `step_name`, if listed."""
    return cmd.parse_steps(ok(slurm.run(cmd.steps_argv(job)))).get(step_name)


def free_port() -> int:
    """A loopback TCP port free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(address: str, port: int) -> bool:
    """Whether a TCP connect to address:port succeeds."""
    try:
        socket.create_connection((address, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def start_step(
    slurm: SlurmCluster,
    job: str,
    step_name: str,
    argv: list[str],
    env: Mapping[str, str] | None = None,
) -> tuple[cmd.StepFiles, str]:
    """Launch a server step in the background from the login host; returns its files and id."""
    files = cmd.step_files(str(slurm.shared_dir), step_name)
    srun = cmd.step_srun_argv(
        job, step_name, argv, files, cpus=CPUS_PER_NODE, gpus=GPUS_PER_NODE, env=env
    )
    assert ok(slurm.login(cmd.background_line(srun, files), timeout=30)).strip().isdigit()
    step_id = until(lambda: step_id_of(slurm, job, step_name), 30, f"step {step_name} listed")
    return files, step_id


def http_server_argv(address: str, port: int) -> list[str]:
    """A long-lived server bound to the node's address (stands in for the runtime)."""
    return [PYTHON, "-m", "http.server", "--bind", address, str(port)]


#: Run on the node inside the allocation (`srun --overlap`): the step's processes with their
#: cmdline and requested environment keys (never the whole environment: it may hold secrets),
#: and which pid owns the listening socket of the port. Prints one JSON object.
PROBE_SOURCE = r"""
import json, os, subprocess, sys
step, port, keys = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
listed = subprocess.run(["scontrol", "listpids", step], capture_output=True, text=True)
pids = [int(line.split()[0]) for line in listed.stdout.splitlines()[1:] if line.split()]
inodes = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for row in rows:
        f = row.split()
        if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f[9])
listeners = set()
for pid in pids:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:[") and link[8:-1] in inodes:
                listeners.add(pid)
    except OSError:
        pass
procs = {}
for pid in pids:
    try:
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:-1]
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    env = dict(e.decode(errors="replace").split("=", 1) for e in environ if b"=" in e)
    wanted = ["SLURM_JOB_ID", "SLURM_STEP_ID", "CUDA_VISIBLE_DEVICES", *keys]
    procs[pid] = {
        "ppid": int(stat[1]),
        "start_ticks": int(stat[19]),
        "cmdline": [c.decode(errors="replace") for c in cmdline],
        "env": {k: env[k] for k in wanted if k in env},
    }
roots = [p for p, info in procs.items() if info["ppid"] not in procs]
print(json.dumps({"pids": pids, "roots": roots, "listeners": sorted(listeners), "procs": procs}))
"""


def probe_argv(
    job: str, step_id: str, port: int, python: str, keys: Sequence[str] = ()
) -> list[str]:
    """An --overlap step on the allocation's node that reads the server step's /proc (the
    product reads it with sweeper.services.identity's probe through NodeHost; this one checks what
    the node shows from the step's side: every pid `scontrol listpids` gives, their env keys)."""
    return cmd.overlap_argv(job, [python, "-c", PROBE_SOURCE, step_id, str(port), *keys])


def probe(
    slurm: SlurmCluster, job: str, step_id: str, port: int, keys: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The step's processes as the node's /proc shows them (through an --overlap step)."""
    return dict(json.loads(ok(slurm.run(probe_argv(job, step_id, port, PYTHON, keys)))))


def cancel_run(slurm: SlurmCluster, run_id: str, timeout: float = 30.0) -> None:
    """scancel every job of the run and wait until squeue lists none of them."""
    ok(slurm.run(cmd.cancel_run_argv(run_id)))
    until(
        lambda: ok(slurm.run(cmd.run_jobs_argv(run_id))).strip() == "",
        timeout,
        f"squeue -n {cmd.job_name(run_id)} empty",
    )
