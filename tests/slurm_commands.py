"""The Slurm command lines a sweeper `slurm` host and step service send to the login host, as
argv lists (the SSH layer quotes every word: `shlex.join`), and parsers for what comes back.

Proven against Debian 12's Slurm 22.05 by tests/test_slurm_cluster.py; the why of each option is
in /work/notes/slurm.md. Pure functions: nothing here runs a command.

One allocation per worker is a *holding batch job* (`sbatch --wrap 'exec sleep infinity'`): it
returns the job id at once, so queue waits are seen (squeue state and reason) and bounded by the
caller, not by a blocking salloc. Each server config is a *job step* launched from the login host
with `srun --jobid` in the background (`nohup`, all stdio redirected, so the SSH command returns);
the step's stdout/stderr go straight from the node to files in the shared directory, srun's own
messages and exit status to a log and an rc file beside them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The program a holding allocation runs on its node until cancelled or out of time.
HOLD_SCRIPT = "exec sleep infinity"


def job_name(run_id: str) -> str:
    """Every job of a run carries this name: the handle for finding and cancelling them all."""
    return f"sweeper-{run_id}"


def allocate_argv(
    run_id: str,
    *,
    time_limit: str,
    output: str,
    gpus_per_node: int = 0,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    constraint: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """sbatch for one whole node held until cancelled; prints the job id (--parsable)."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name(run_id)}",
        "--nodes=1",
        "--exclusive",  # every CPU of the node: nothing else lands beside the server
        "--mem=0",  # all of its memory (CR_*_Memory otherwise defaults per site)
        "--no-requeue",  # a node failure ends the job (NODE_FAIL) instead of re-running it
        f"--time={time_limit}",
        f"--output={output}",
    ]
    if gpus_per_node:
        argv.append(f"--gres=gpu:{gpus_per_node}")
    for flag, value in (("partition", partition), ("account", account), ("qos", qos)):
        if value:
            argv.append(f"--{flag}={value}")
    if constraint:
        argv.append(f"--constraint={constraint}")
    return [*argv, *extra, f"--wrap={HOLD_SCRIPT}"]


def parse_job_id(sbatch_stdout: str) -> str:
    """The job id `sbatch --parsable` printed ("123" or "123;cluster")."""
    text = sbatch_stdout.strip().split(";")[0]
    if not text.isdigit():
        raise ValueError(f"sbatch printed no job id: {sbatch_stdout!r}")
    return text


def job_argv(job: str) -> list[str]:
    """One line about a job while squeue knows it: state|reason|node|time left."""
    return ["squeue", "-h", "-j", job, "-o", "%T|%r|%N|%L"]


def run_jobs_argv(run_id: str) -> list[str]:
    """Every job of the run still known to squeue (pending, running, completing): id|state."""
    return ["squeue", "-h", f"--name={job_name(run_id)}", "-o", "%i|%T"]


def cancel_run_argv(run_id: str) -> list[str]:
    """Cancel every job of the run, pending or running (scancel matches the job name)."""
    return ["scancel", f"--name={job_name(run_id)}"]


def show_job_argv(job: str) -> list[str]:
    """The controller's record of a job, running or finished (kept for MinJobAge)."""
    return ["scontrol", "show", "job", "-o", job]


def parse_show_job(text: str) -> dict[str, str]:
    """`scontrol show job -o` as {key: value} (values never contain spaces except Command=)."""
    fields: dict[str, str] = {}
    for word in text.strip().split(" "):
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
    return fields


def sacct_argv(job: str) -> list[str]:
    """slurmdbd's record of a job and each of its steps: id|name|state|exit code (where a site
    runs slurmdbd; `sacct` fails with "accounting storage is disabled" where it does not)."""
    return ["sacct", "-j", job, "-n", "-P", "-o", "JobID,JobName,State,ExitCode"]


def parse_sacct(text: str) -> dict[str, tuple[str, str, str]]:
    """sacct_argv output as {"12" / "12.batch" / "12.0": (name, state, exit code)}.

    A node death marks the job NODE_FAIL but its running steps only CANCELLED with no exit code:
    the job's state is the reason."""
    rows = {}
    for line in text.splitlines():
        if line.strip():
            job_id, name, state, exit_code = line.split("|")
            rows[job_id] = (name, state.split(" ")[0], exit_code)
    return rows


def time_left_seconds(text: str) -> float | None:
    """squeue's %L ("45", "3:05", "1:02:03", "2-00:00:00") in seconds; None when unlimited."""
    text = text.strip()
    if text in ("UNLIMITED", "NOT_SET", "INVALID", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    return float(((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds)


@dataclass(frozen=True)
class StepFiles:
    """Where a step's output lands (in the shared directory, so the login host can read it)."""

    stdout: str  # the server's stdout, written by slurmstepd on the node
    stderr: str
    srun_log: str  # srun's own messages on the login host ("task 0: Exited with exit code 3")
    srun_rc: str  # srun's exit status, written when srun ends (the step's outcome)


def step_files(shared_dir: str, step_name: str) -> StepFiles:
    """Per-step files, named after the (unique) step name."""
    base = f"{shared_dir}/{step_name}"
    return StepFiles(f"{base}.out", f"{base}.err", f"{base}.srun.log", f"{base}.srun.rc")


def step_srun_argv(
    job: str,
    step_name: str,
    argv: Sequence[str],
    files: StepFiles,
    *,
    cpus: int,
    gpus: int = 0,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """srun for a server step taking all of the allocation's CPUs and GPUs.

    Taking everything makes Slurm itself refuse a second server step until the previous one has
    exited ("step creation temporarily disabled", srun waits), so a restart can never overlap.
    The environment is set with `env K=V` (exec: the pid stays the server's) instead of
    --export, whose commas cannot be quoted.
    """
    srun = [
        "srun",
        f"--jobid={job}",
        f"--job-name={step_name}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={cpus}",
        "--mem=0",
        "--input=none",
        f"--output={files.stdout}",
        f"--error={files.stderr}",
    ]
    if gpus:
        srun.append(f"--gres=gpu:{gpus}")
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return [*srun, *prefix, *argv]


def background_line(srun_argv: Sequence[str], files: StepFiles) -> str:
    """The remote shell line that starts srun detached and prints srun's wrapper pid.

    Every fd of the background job is redirected: one left on the SSH channel keeps the
    SSH command open until the step ends. srun must outlive the SSH session (nohup), because a
    step dies with its srun.
    """
    record_rc = f'"$@"; echo $? > {shlex.quote(files.srun_rc)}'
    return (
        f"nohup sh -c {shlex.quote(record_rc)} sh {shlex.join(srun_argv)}"
        f" </dev/null >{shlex.quote(files.srun_log)} 2>&1 & echo $!"
    )


def steps_argv(job: str) -> list[str]:
    """The job's steps now running: id|name (e.g. "12.3|sweeper-r1-c0", "12.batch|batch")."""
    return ["squeue", "-h", "-s", "-j", job, "-o", "%i|%j"]


def parse_steps(text: str) -> dict[str, str]:
    """steps_argv output as {step name: step id} (the batch and extern steps included)."""
    steps = {}
    for line in text.splitlines():
        step_id, _, name = line.strip().partition("|")
        if step_id:
            steps[name] = step_id
    return steps


def stop_step_argv(step_id: str, *, hard: bool = False) -> list[str]:
    """SIGTERM to the step's processes (graceful), or end the step (scancel's default SIGKILL)."""
    return ["scancel", step_id] if hard else ["scancel", "--signal=TERM", step_id]


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
    """srun an --overlap probe step on the allocation's node that reads the server step's /proc.

    --overlap: the server step holds every CPU, GPU and all memory; without it the probe would
    wait for the server to end.
    """
    return [
        "srun",
        f"--jobid={job}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--job-name=sweeper-probe",
        python,
        "-c",
        PROBE_SOURCE,
        step_id,
        str(port),
        *keys,
    ]
