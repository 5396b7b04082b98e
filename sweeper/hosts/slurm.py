"""A Slurm cluster as the sweeper sees it: its login host (`SlurmLogin`, over SSH), the
allocations a run holds there (`Allocation`: one node, held by a job named `sweeper-<run id>`),
and the node of an allocation as a `Host` (`NodeHost`: commands run there as
`srun --overlap --jobid` steps from the login host, its ports are reached directly or through an
SSH tunnel via the login host).

Every command is an argv list from `slurm_commands.py`; the SSH layer quotes every word. The
scheduler's own words name what went wrong: sbatch's stderr for a refused allocation, the job's
state, reason and exit code (scontrol, else sacct) for one that ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from sweeper.hosts import CommandResult, HostError
from sweeper.hosts.slurm_commands import (
    AllocationOptions,
    JobLine,
    allocate_argv,
    cancel_job_argv,
    cancel_run_argv,
    job_argv,
    job_name,
    node_address_argv,
    overlap_argv,
    parse_job_id,
    parse_job_line,
    parse_run_jobs,
    parse_sacct,
    parse_show_job,
    parse_steps,
    run_jobs_argv,
    sacct_argv,
    show_job_argv,
    steps_argv,
    time_left_seconds,
)
from sweeper.hosts.ssh import SSHHost
from sweeper.poll import WaitTimeout, wait_until


class AllocationRefused(HostError):
    """sbatch refused the request (bad partition, impossible resources): not a queue wait."""


@dataclass
class Allocation:
    """One node held for a worker: the job, where it runs, and whether it is lost."""

    job: str
    node: str
    #: The node's address as the login host resolves it (where its servers are reached).
    address: str
    cpus: int
    #: time.monotonic() when it was first seen running.
    since: float = field(default_factory=time.monotonic)
    #: Server configs started in it so far.
    configs: int = 0
    #: Set once the scheduler has ended the job (node failure, time limit, cancelled).
    lost_event: threading.Event = field(default_factory=threading.Event)
    _reason: str = ""

    def lose(self, reason: str) -> None:
        """Record the scheduler's reason the first time the job is seen gone."""
        if not self.lost_event.is_set():
            self._reason = reason
            self.lost_event.set()

    @property
    def lost(self) -> str | None:
        """The scheduler's reason when the job has ended, else None."""
        return self._reason if self.lost_event.is_set() else None


class SlurmLogin:
    """The login host of a cluster, for one run: submit, watch, explain and cancel its jobs."""

    def __init__(
        self, ssh: SSHHost, run_id: str, options: AllocationOptions, shared_dir: str
    ) -> None:
        self.ssh = ssh
        self.run_id = run_id
        self.options = options
        self.shared_dir = shared_dir.rstrip("/") or "/"
        #: The run's files in the shared directory: allocation and step output, secrets.
        self.run_dir = f"{self.shared_dir}/runs/{job_name(run_id)}"
        self._prepared = False
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.ssh.name

    def run(
        self, argv: Sequence[str], *, timeout: float = 60.0, check: bool = True
    ) -> CommandResult:
        """A command on the login host."""
        return self.ssh.run(argv, timeout=timeout, check=check)

    def prepare(self) -> None:
        """The run's directory in the shared directory (0700: it may hold secrets files)."""
        with self._lock:
            if not self._prepared:
                self.run(["mkdir", "-p", self.run_dir])
                self.run(["chmod", "0700", self.run_dir])
                self._prepared = True

    # ------------------------------------------------------------------ allocations

    def submit(self) -> str:
        """Ask for one node; returns the job id at once (it may pend in the queue)."""
        self.prepare()
        argv = allocate_argv(self.run_id, self.options, output=f"{self.run_dir}/alloc-%j.out")
        result = self.run(argv, check=False)
        if not result.ok:
            message = result.stderr.strip() or f"exit {result.exit_code}"
            raise AllocationRefused(f"{self.name}: sbatch refused the allocation: {message}")
        return parse_job_id(result.stdout)

    def job(self, job: str) -> JobLine | None:
        """squeue's line about the job; None once squeue no longer lists it. A squeue that
        fails otherwise (slurmctld busy: "Socket timed out") raises HostError: not knowing is
        not the job's end."""
        result = self.run(job_argv(job), check=False)
        if not result.ok and "Invalid job id" not in result.stderr:
            raise HostError(f"{self.name}: squeue failed: {result.stderr.strip()[-300:]}")
        return parse_job_line(result.stdout)

    def steps(self, job: str) -> dict[str, str] | None:
        """The job's running steps {name: id}; None when squeue could not say (see `job`)."""
        result = self.run(steps_argv(job), check=False)
        return parse_steps(result.stdout) if result.ok else None

    def show_job(self, job: str) -> dict[str, str]:
        """The controller's record of the job ({} once it forgot it, after MinJobAge)."""
        result = self.run(show_job_argv(job), check=False)
        return parse_show_job(result.stdout) if result.ok else {}

    def allocation(self, job: str, line: JobLine) -> Allocation:
        """A RUNNING job as an Allocation: its node, the node's address, its CPUs."""
        resolved = self.run(node_address_argv(line.node), check=False).stdout.split()
        address = resolved[0] if resolved else line.node
        cpus = self.show_job(job).get("NumCPUs", "1")
        return Allocation(job, line.node, address, int(cpus) if cpus.isdigit() else 1)

    def time_left(self, job: str) -> float | None:
        """Seconds until the job's time limit (squeue %L); None when unlimited or not listed."""
        line = self.job(job)
        return time_left_seconds(line.left) if line is not None else None

    def end_reason(self, job: str) -> str:
        """Why the job is not running, in the scheduler's words (state, reason, exit code)."""
        fields = self.show_job(job)
        if fields.get("JobState"):
            state = fields["JobState"]
            prefix = "node failure: " if state == "NODE_FAIL" else ""
            return (
                f"{prefix}slurm job {job} {state} (reason {fields.get('Reason', '?')}, "
                f"exit code {fields.get('ExitCode', '?')}) on {fields.get('NodeList', '?')}"
            )
        rows = self.accounting(job)
        if job in rows:
            _name, state, code = rows[job]
            prefix = "node failure: " if state == "NODE_FAIL" else ""
            return f"{prefix}slurm job {job} {state} (exit code {code or '?'})"
        return f"slurm job {job} is gone and the scheduler no longer says why"

    def accounting(self, job: str) -> dict[str, tuple[str, str, str]]:
        """sacct's rows for the job and its steps; {} where the site runs no slurmdbd."""
        result = self.run(sacct_argv(job), check=False)
        return parse_sacct(result.stdout) if result.ok else {}

    def cancel(self, job: str) -> None:
        self.run(cancel_job_argv(job), check=False)

    # ------------------------------------------------------------------ the whole run

    def run_jobs(self) -> dict[str, str]:
        """Every job of the run squeue still lists: {job id: state}."""
        return parse_run_jobs(self.run(run_jobs_argv(self.run_id)).stdout)

    def cancel_run(self, timeout_s: float = 120.0) -> dict[str, str]:
        """Cancel every job of the run and wait until squeue lists none; returns what was there.
        The steps' secrets files go too (they only ever serve a running step).

        Safe to repeat; the one cleanup for the end of a sweep, a failure, Ctrl-C and a resume.
        """
        found = self.run_jobs()
        if found:
            self._cancel_and_wait(timeout_s)
        self.run(["sh", "-c", 'rm -f -- "$1"/*.env', "sh", self.run_dir], check=False)
        return found

    def _none_left(self) -> bool:
        try:
            return not self.run_jobs()
        except HostError:
            return False  # squeue did not answer this time: ask again

    def _cancel_and_wait(self, timeout_s: float) -> None:
        self.run(cancel_run_argv(self.run_id))
        try:
            wait_until(self._none_left, timeout_s=timeout_s, interval_s=0.1, max_interval_s=1.0)
        except WaitTimeout:
            left = self.run_jobs()
            raise HostError(
                f"{self.name}: jobs of {job_name(self.run_id)} still listed {timeout_s:.0f} s "
                f"after scancel: {left}"
            ) from None


class NodeHost:
    """The node of an allocation as a `Host`: commands run there through `srun --overlap` from
    the login host (the node's /proc, its Python), files are the shared directory's, and its
    ports are reached through the login host. Nothing to close: the login host owns the
    connection."""

    def __init__(self, login: SlurmLogin, allocation: Allocation) -> None:
        self.login = login
        self.allocation = allocation
        self.name = allocation.node
        self.address = allocation.address

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        sudo: bool = False,
    ) -> CommandResult:
        if sudo:
            raise HostError(f"{self.name}: sudo on a compute node is not supported")
        return self.login.ssh.run(
            overlap_argv(self.allocation.job, argv), timeout=timeout, check=check, env=env
        )

    def put_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Through the login host: only paths in the shared directory reach the node."""
        self.login.ssh.put_file(path, data, mode=mode)

    def read_file(self, path: str) -> bytes:
        """Through the login host: only paths in the shared directory are the node's."""
        return self.login.ssh.read_file(path)

    def open_tunnel(self, remote_port: int) -> AbstractContextManager[int]:
        """login host -> node:port; every connection is cut when the allocation is lost."""
        return self.login.ssh.open_tunnel(
            remote_port, host=self.address, abort=self.allocation.lost_event
        )

    def close(self) -> None:
        """The login host's connection is closed with the login host."""
