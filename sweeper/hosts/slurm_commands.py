"""The Slurm command lines a `slurm` host sends to its login host, as argv lists (the SSH layer
quotes every word: `shlex.join`), and parsers for what comes back. Pure functions: nothing here
runs a command.

Proven against Debian 12's Slurm 22.05 (tests/test_slurm_cluster.py, tests/test_slurm_faults.py).
One allocation per worker is a *holding batch job* (`sbatch --wrap 'exec sleep infinity'`): it
returns the job id at once, so a queue wait is seen (squeue state and reason) and bounded by the
sweeper, not by a blocking salloc. Each server config is a *job step* launched from the login host
with `srun --jobid` in the background (`nohup`, all stdio redirected, so the SSH command returns);
the step's output goes straight from the node to a file in the shared directory, srun's own
messages and exit status to a log and an rc file beside it. Commands on the node itself (the
/proc probe, `scontrol listpids`) run as `srun --overlap` steps of the same allocation.
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


@dataclass(frozen=True)
class AllocationOptions:
    """What each allocation asks the scheduler for (the spec's slurm host keys)."""

    time_limit: str | None = None
    gpus_per_node: int = 0
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    extra: tuple[str, ...] = ()


def allocate_argv(run_id: str, options: AllocationOptions, *, output: str) -> list[str]:
    """sbatch for one whole node held until cancelled; prints the job id (--parsable)."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name(run_id)}",
        "--nodes=1",
        "--exclusive",  # every CPU of the node: nothing else lands beside the server
        "--mem=0",  # all of its memory (CR_*_Memory otherwise defaults per site)
        "--no-requeue",  # a node failure ends the job (NODE_FAIL) instead of re-running it
        f"--output={output}",
    ]
    if options.time_limit:
        argv.append(f"--time={options.time_limit}")
    if options.gpus_per_node:
        argv.append(f"--gres=gpu:{options.gpus_per_node}")
    for flag, value in (
        ("partition", options.partition),
        ("account", options.account),
        ("qos", options.qos),
        ("constraint", options.constraint),
    ):
        if value:
            argv.append(f"--{flag}={value}")
    return [*argv, *options.extra, f"--wrap={HOLD_SCRIPT}"]


def parse_job_id(sbatch_stdout: str) -> str:
    """The job id `sbatch --parsable` printed ("123" or "123;cluster")."""
    text = sbatch_stdout.strip().split(";")[0]
    if not text.isdigit():
        raise ValueError(f"sbatch printed no job id: {sbatch_stdout!r}")
    return text


@dataclass(frozen=True)
class JobLine:
    """squeue's one line about a job it still lists."""

    state: str
    reason: str
    node: str
    left: str


def job_argv(job: str) -> list[str]:
    """One line about a job while squeue knows it: state|reason|node|time left."""
    return ["squeue", "-h", "-j", job, "-o", "%T|%r|%N|%L"]


def parse_job_line(text: str) -> JobLine | None:
    """job_argv's answer; None when squeue no longer lists the job."""
    line = text.strip()
    if not line:
        return None
    state, reason, node, left = (line.splitlines()[0].split("|") + ["", "", ""])[:4]
    return JobLine(state, reason, node, left)


def run_jobs_argv(run_id: str) -> list[str]:
    """Every job of the run still known to squeue (pending, running, completing): id|state."""
    return ["squeue", "-h", f"--name={job_name(run_id)}", "-o", "%i|%T"]


def parse_run_jobs(text: str) -> dict[str, str]:
    """run_jobs_argv's answer as {job id: state}."""
    jobs = {}
    for line in text.splitlines():
        job, _, state = line.strip().partition("|")
        if job:
            jobs[job] = state
    return jobs


def cancel_run_argv(run_id: str) -> list[str]:
    """Cancel every job of the run, pending or running (scancel matches the job name)."""
    return ["scancel", f"--name={job_name(run_id)}"]


def cancel_job_argv(job: str) -> list[str]:
    """Cancel one job (an allocation given up: queue deadline, too short, no work left)."""
    return ["scancel", job]


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
        parts = line.split("|")
        if len(parts) == 4:
            job_id, name, state, exit_code = parts
            rows[job_id] = (name, state.split(" ")[0], exit_code)
    return rows


def time_left_seconds(text: str) -> float | None:
    """squeue's %L ("0:45", "3:05", "1:02:03", "2-00:00:00") in seconds; None when unlimited."""
    text = text.strip()
    if text in ("UNLIMITED", "NOT_SET", "INVALID", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    return float(((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds)


def node_address_argv(node: str) -> list[str]:
    """The node's address as the login host resolves it (where the controller reaches it)."""
    return ["getent", "hosts", node]


@dataclass(frozen=True)
class StepFiles:
    """Where a step's output lands (in the shared directory, so the login host can read it)."""

    #: The server's stdout and stderr, written by slurmstepd on the node (one file, in order).
    output: str
    #: srun's own messages on the login host ("task 0: Exited with exit code 3").
    srun_log: str
    #: srun's exit status, written when srun ends. srun exits 0 when the node dies under it:
    #: never read a node failure from it.
    srun_rc: str


def step_files(directory: str, step_name: str) -> StepFiles:
    """Per-step files, named after the (unique) step name."""
    base = f"{directory}/{step_name}"
    return StepFiles(f"{base}.out", f"{base}.srun.log", f"{base}.srun.rc")


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
    --export, whose commas cannot be quoted. Without --error, stderr goes to --output too.
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
        f"--output={files.output}",
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


def overlap_argv(job: str, argv: Sequence[str], *, name: str = "sweeper-probe") -> list[str]:
    """Run argv on the allocation's node as an extra step beside the server.

    --overlap: the server step holds every CPU, GPU and all memory; without it this step would
    wait for the server to end.
    """
    return [
        "srun",
        f"--jobid={job}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--quiet",
        "--input=none",
        f"--job-name={name}",
        *argv,
    ]


def listpids_argv(step_id: str) -> list[str]:
    """The step's processes, as the node's slurmstepd knows them (must run on the node)."""
    return ["scontrol", "listpids", step_id]


def parse_listpids(text: str) -> int | None:
    """The pid of the step's task (LOCALID 0) from `scontrol listpids`; None when not yet there.

    Its children are listed too, with LOCALID "-"."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 4 and fields[3] == "0" and fields[0].isdigit():
            return int(fields[0])
    return None
