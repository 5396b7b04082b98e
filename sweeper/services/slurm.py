"""The runtime as a Slurm job step in a worker's allocation: the `Service` for slurm hosts.

Each start launches a new step (`srun --jobid` in the background on the login host, a unique step
name per launch, every CPU and GPU of the node, so Slurm itself keeps two servers from
overlapping), waits until squeue lists it by name (its id is read, never guessed) and until the
node's slurmstepd lists its task (`scontrol listpids` through `srun --overlap`): that pid is the
instance's, proven from the node's /proc by readiness as for systemd. Secrets reach the step
through a 0600 file in the run's 0700 directory, sourced by `sh` right before it execs the
server, never on a command line. Stopping sends SIGTERM to the step, then SIGKILL after the
grace. `state()` says why a step is gone in the scheduler's words: the allocation lost (node
failure, time limit: the job's state, reason and exit code; the remaining points may run
elsewhere), or the step ended while the job runs (srun's exit and log, sacct's state where
there is accounting). A step's output lands in one file in the shared directory; `logs()` reads
it from a byte offset, so each point gets exactly its own lines, like a journal cursor.

`SlurmRunService` is the run's jobs as a whole: stopping it cancels every job named
`sweeper-<run id>` and waits until squeue lists none.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
from collections.abc import Mapping

from sweeper.engines.launch import Launch
from sweeper.hosts import HostError
from sweeper.hosts.slurm import Allocation, NodeHost, SlurmLogin
from sweeper.hosts.slurm_commands import (
    StepFiles,
    background_line,
    job_name,
    listpids_argv,
    parse_listpids,
    step_files,
    step_srun_argv,
    stop_step_argv,
)
from sweeper.poll import WaitTimeout, wait_until
from sweeper.services import Instance, ServiceError, ServiceState

#: Lines of srun's own log quoted in a reason.
SRUN_LOG_LINES = 3
#: Prints "<size>\n" then the file's bytes from offset $2 to that size (nothing when absent).
READ_FROM = (
    'n=$(stat -c %s -- "$1" 2>/dev/null) || { echo 0; exit 0; }; echo "$n"; '
    '[ "$n" -gt "$2" ] && tail -c +$(($2 + 1)) -- "$1" | head -c $((n - $2)); exit 0'
)
#: The step's program when it has secrets: source them, then become the server (same pid).
WITH_SECRETS = '. "$0" && exec "$@"'


class SlurmStepService:
    """Starts, watches and stops server steps in one allocation; one step at a time."""

    def __init__(
        self,
        login: SlurmLogin,
        allocation: Allocation,
        node: NodeHost,
        *,
        gpus: int = 0,
        extra_env: Mapping[str, str] | None = None,
        timeout_stop_s: float = 15.0,
        activation_timeout_s: float = 120.0,
    ) -> None:
        self.login = login
        self.allocation = allocation
        self.node = node
        self.gpus = gpus
        self.extra_env = dict(extra_env or {})
        self.timeout_stop_s = timeout_stop_s
        self.activation_timeout_s = activation_timeout_s
        self._lock = threading.Lock()
        self._step: str | None = None  # the current step's id, e.g. "12.3"
        self._files: StepFiles | None = None
        self._secrets: str | None = None
        self._ended: ServiceState | None = None

    @property
    def job(self) -> str:
        return self.allocation.job

    # ------------------------------------------------------------------ Service

    def start(self, launch: Launch) -> Instance:
        with self._lock:
            try:
                return self._start(launch)
            except ServiceError:
                raise
            except (RuntimeError, OSError) as exc:  # HostError
                raise ServiceError(f"{self.node.name}: cannot start a step: {exc}") from exc

    def _start(self, launch: Launch) -> Instance:
        lost = self.allocation.lost
        if lost:
            raise ServiceError(f"the allocation is gone: {lost}")
        name = f"{job_name(self.login.run_id)}-{launch.launch_id}"
        files = step_files(self.login.run_dir, name)
        argv = list(launch.argv)
        if launch.secret_env:
            self._secrets = f"{self.login.run_dir}/{name}.env"
            text = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in launch.secret_env.items())
            self.login.ssh.put_file(self._secrets, text.encode(), mode=0o600)
            argv = ["sh", "-c", WITH_SECRETS, self._secrets, *argv]
        env = {**self.extra_env, **launch.env}
        srun = step_srun_argv(
            self.job, name, argv, files, cpus=self.allocation.cpus, gpus=self.gpus, env=env
        )
        if launch.workdir:
            srun.insert(1, f"--chdir={launch.workdir}")
        self.login.run(["sh", "-c", background_line(srun, files)], timeout=60.0)
        self._step, self._files, self._ended = None, files, None
        self._step = self._wait_listed(name, files)
        self.allocation.configs += 1
        pid = self._wait_task_pid(self._step)
        return Instance(
            launch=dataclasses.replace(launch, env=env),
            pid=pid,
            invocation_id=self._step,
            placement={
                "slurm_job_id": self.job,
                "slurm_step_id": self._step,
                "slurm_node": self.allocation.node,
            },
        )

    def _wait_listed(self, name: str, files: StepFiles) -> str:
        """The new step's id once squeue lists it; its end (srun's rc file) or the allocation's
        end first is a failed start with the scheduler's words."""

        def listed() -> str | None:
            steps = self.login.steps(self.job)
            if steps is None:
                return None  # squeue did not answer this time
            if name in steps:
                return steps[name]
            if self._read(files.srun_rc).strip():
                raise ServiceError(f"step {name} ended at once: {self._srun_words(files)}")
            if self._allocation_ended():
                raise ServiceError(f"the allocation is gone: {self.allocation.lost}")
            return None

        try:
            return wait_until(
                listed, timeout_s=self.activation_timeout_s, interval_s=0.05, max_interval_s=0.5
            ).value
        except WaitTimeout:
            raise ServiceError(
                f"step {name} not listed by squeue after {self.activation_timeout_s:.0f} s: "
                f"{self._srun_words(files)}"
            ) from None

    def _wait_task_pid(self, step: str) -> int:
        """The step's task pid as the node's slurmstepd lists it (LOCALID 0)."""

        def pid() -> int | None:
            found = parse_listpids(self.node.run(listpids_argv(step), check=False).stdout)
            if found is None and self._state_now().exited:
                raise ServiceError(f"step {step} ended before its task started: {self._why()}")
            return found

        try:
            return wait_until(pid, timeout_s=30.0, interval_s=0.1, max_interval_s=1.0).value
        except WaitTimeout:
            raise ServiceError(f"step {step}: the node lists no task pid after 30 s") from None

    def state(self) -> ServiceState:
        return self._state_now()

    def _state_now(self) -> ServiceState:
        lost = self.allocation.lost
        placement = self._placement()
        if lost:
            return ServiceState(
                False, True, None, lost, reason=lost, host_lost=True, placement=placement
            )
        if self._step is None:
            return ServiceState(False, False, detail="no step started", placement=placement)
        if self._ended is not None:
            return self._ended
        steps = self.login.steps(self.job)
        if steps is None or self._step in steps.values():
            # Running, or squeue could not say this time: not knowing is not an end.
            said = "running" if steps is not None else "running as far as known (squeue failed)"
            return ServiceState(
                True, False, detail=f"step {self._step} {said}", placement=placement
            )
        ended = self._allocation_ended()
        if ended is None:  # squeue could not say: not knowing is not an end
            return ServiceState(True, False, detail="job state unknown", placement=placement)
        if ended:
            return self._state_now()
        reason = self._why()
        rc = self._read(self._files.srun_rc).strip() if self._files else ""
        self._ended = ServiceState(
            False,
            True,
            int(rc) if rc.lstrip("-").isdigit() else None,
            reason,
            reason=reason,
            placement=placement,
        )
        return self._ended

    def _allocation_ended(self) -> bool | None:
        """Whether the job no longer runs (then the allocation is marked lost with the
        scheduler's reason); None when squeue could not say."""
        try:
            line = self.login.job(self.job)
        except HostError:
            return None
        if line is not None and line.state == "RUNNING":
            return False
        self.allocation.lose(self.login.end_reason(self.job))
        return True

    def _why(self) -> str:
        """Why the current step ended while its job runs: sacct's state where there is
        accounting, srun's exit status and its last words."""
        step = self._step or "?"
        rows = self.login.accounting(self.job) if self._step else {}
        _name, state, code = rows.get(step, ("", "", ""))
        accounted = f" {state} (exit code {code or '?'})" if state else ""
        words = self._srun_words(self._files) if self._files else ""
        return f"slurm step {step} ended{accounted}: {words}"

    def _srun_words(self, files: StepFiles | None) -> str:
        if files is None:
            return "no step"
        rc = self._read(files.srun_rc).strip()
        log = [line for line in self._read(files.srun_log).splitlines() if line.strip()]
        said = " | ".join(log[-SRUN_LOG_LINES:]) or "srun printed nothing"
        return f"srun exit {rc or 'pending'}: {said}"

    def _placement(self) -> dict[str, str]:
        placed = {"slurm_job_id": self.job, "slurm_node": self.allocation.node}
        return {**placed, "slurm_step_id": self._step} if self._step else placed

    def logs(self, cursor: str | None = None) -> tuple[str, str]:
        files = self._files
        if files is None:
            return "", cursor or ""
        offset = 0
        if cursor and cursor.startswith(f"{files.output}@"):
            offset = int(cursor.rsplit("@", 1)[1])
        try:
            out = self.login.run(["sh", "-c", READ_FROM, "sh", files.output, str(offset)]).stdout
        except HostError as exc:
            return f"(step output unavailable: {exc})\n", cursor or ""
        size, _, text = out.partition("\n")
        end = int(size) if size.strip().isdigit() else offset
        if self._ended is not None or self.allocation.lost:
            text += "".join(f"[srun] {line}\n" for line in self._read(files.srun_log).splitlines())
        return text, f"{files.output}@{max(end, offset)}"

    def stop(self, timeout: float = 15.0) -> None:
        with self._lock:
            try:
                self._stop(timeout)
            except ServiceError:
                raise
            except (RuntimeError, OSError) as exc:
                raise ServiceError(
                    f"{self.node.name}: cannot stop step {self._step}: {exc}"
                ) from exc

    def _stop(self, timeout: float) -> None:
        step = self._step
        if step is None or self.allocation.lost or self._ended is not None:
            self._forget_secrets()
            return
        self.login.run(stop_step_argv(step), check=False)
        if not self._gone(step, timeout):
            self.login.run(stop_step_argv(step, hard=True), check=False)
            if not self._gone(step, self.timeout_stop_s):
                raise ServiceError(f"step {step} still listed after SIGTERM and SIGKILL")
        self._ended = ServiceState(
            False, True, None, f"step {step} stopped by the sweeper", placement=self._placement()
        )
        self._forget_secrets()

    def _gone(self, step: str, timeout: float) -> bool:
        def gone() -> bool:
            steps = self.login.steps(self.job)
            return steps is not None and step not in steps.values()

        try:
            wait_until(gone, timeout_s=timeout, interval_s=0.05, max_interval_s=0.5)
        except WaitTimeout:
            return False
        return True

    def _forget_secrets(self) -> None:
        if self._secrets is not None:
            self.login.run(["rm", "-f", self._secrets], check=False)
            self._secrets = None

    def _read(self, path: str) -> str:
        try:
            return self.login.ssh.read_file(path).decode("utf-8", "replace")
        except (FileNotFoundError, HostError):
            return ""


class SlurmRunService:
    """Every job of one run as a service: `stop()` is the run's cleanup (scancel by name, then
    until squeue lists none). It starts nothing: servers start in the workers' allocations."""

    def __init__(self, login: SlurmLogin) -> None:
        self.login = login

    def start(self, launch: Launch) -> Instance:
        raise ServiceError("a slurm host starts its servers in its workers' allocations")

    def state(self) -> ServiceState:
        return ServiceState(running=False, exited=False, detail="the run's allocations")

    def logs(self, cursor: str | None = None) -> tuple[str, str]:
        return "", cursor or ""

    def stop(self, timeout: float = 15.0) -> None:
        try:
            self.login.cancel_run()
        except (RuntimeError, OSError) as exc:
            raise ServiceError(f"{self.login.name}: cannot cancel the run's jobs: {exc}") from exc
