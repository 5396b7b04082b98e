"""A Slurm host's workers: one allocation each, server configs spread over them.

Each worker submits one holding allocation and waits for it once (progress shows the queue wait
and Slurm's pending reason, apart from model loads; the manifest adds it up as `<host>.queue_s`),
then runs config after config from the host's `ConfigQueue` as steps in it. Before a config
starts, the allocation's time left (squeue %L) is compared with the config's expected duration
(the plan's estimate, scaled by how long the configs measured so far took against theirs) plus
the spec's margin: an allocation that has already served and would end inside the config is
cancelled and replaced first, never killed halfway through. A watchdog notices when the
scheduler ends an allocation (node failure, time limit); the point in flight fails with the
scheduler's words, the config's unmeasured points go back to the queue for a surviving worker,
and the worker asks for a replacement, but waits at most `replace_wait_s` for it (the first
allocation waits `queue_wait_s`, unbounded by default): a node that is gone never holds up the
sweep. A worker with nothing left to run cancels its allocation (or its pending request) at once.

Before anything, the run's jobs left by a killed controller (same run id: `--resume`) are
cancelled by name; at the end, the runner's cleanup cancels them all again (`SlurmRunService`).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic

from sweeper.hosts import HostError
from sweeper.hosts.slurm import Allocation, AllocationRefused, SlurmLogin
from sweeper.hosts.slurm_commands import JobLine
from sweeper.plan import Step
from sweeper.services.identity import Identity
from sweeper.workers import B, Work, WorkerHooks
from sweeper.workers.allocation import allocate
from sweeper.workers.queue import MAX_RELOCATIONS, ConfigQueue

#: Seconds between plain-progress lines of one unchanged queue wait.
QUEUE_NOTE_S = 30.0
#: Watchdog looks that may fail to say why an ended job ended before it is lost without words.
END_REASON_TRIES = 3


@dataclass(frozen=True)
class WorkerPolicy:
    """How many workers, how long they wait for nodes, how much slack a config needs."""

    workers: int = 1
    queue_wait_s: float | None = None
    replace_wait_s: float = 600.0
    time_margin_s: float = 60.0
    #: Seconds between squeue polls while an allocation is pending.
    poll_s: float = 1.0
    #: Seconds between the watchdog's looks at a running allocation.
    watch_s: float = 3.0


class Estimator:
    """A config's expected duration: the plan's estimate times the mean ratio of measured to
    estimated duration over the configs that ran completely so far (1 before any)."""

    def __init__(self, estimate: Callable[[Step], float]) -> None:
        self._estimate = estimate
        self._ratios: list[float] = []
        self._lock = threading.Lock()

    def expected(self, step: Step) -> float:
        with self._lock:
            ratio = statistics.fmean(self._ratios) if self._ratios else 1.0
        return self._estimate(step) * ratio

    def observe(self, step: Step, seconds: float) -> None:
        with self._lock:
            self._ratios.append(seconds / max(self._estimate(step), 1e-3))


class _Watchdog:
    """Marks an allocation lost as soon as squeue stops showing it RUNNING (its tunnels close),
    with the scheduler's reason, or with squeue's state when that reason cannot be had after
    `END_REASON_TRIES` looks."""

    def __init__(self, login: SlurmLogin, allocation: Allocation, interval_s: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch,
            args=(login, allocation, interval_s),
            daemon=True,
            name=f"watch-{allocation.job}",
        )
        self._thread.start()

    def _watch(self, login: SlurmLogin, allocation: Allocation, interval_s: float) -> None:
        unexplained = 0  # looks in a row that saw the job ended but got no reason for it
        while not self._stop.wait(interval_s) and not allocation.lost:
            try:
                line = login.job(allocation.job)
            except (HostError, OSError):
                continue  # the login host is unreachable for now: that is not the node's loss
            if line is not None and line.state == "RUNNING":
                unexplained = 0
                continue
            try:
                allocation.lose(login.end_reason(allocation.job))
            except (HostError, OSError) as exc:
                # squeue has said it ended: that is known; only its words are missing. Asking
                # for them forever would leave the point in flight waiting on a dead node.
                unexplained += 1
                if unexplained >= END_REASON_TRIES:
                    state = "is gone" if line is None else line.state
                    allocation.lose(f"slurm job {allocation.job} {state} (no reason: {exc})")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class SlurmWorkers(Generic[B]):
    """The worker pool of one slurm host (see the module docstring)."""

    def __init__(
        self,
        login: SlurmLogin,
        make_backend: Callable[[Allocation], B],
        policy: WorkerPolicy,
        estimate: Callable[[Step], float],
        prepare: Callable[[], object] | None = None,
    ) -> None:
        self.login = login
        self.make_backend = make_backend
        self.policy = policy
        self.estimator = Estimator(estimate)
        self._prepare = prepare
        #: Why workers retired, last first in the failure of what nobody ran.
        self.reasons: list[str] = []

    def run(self, host: str, work: list[Work], hooks: WorkerHooks[Any]) -> None:
        found = self.login.cancel_run()
        if found:
            listed = ", ".join(f"{job} {state}" for job, state in sorted(found.items()))
            hooks.progress.status(host, f"cancelled the run's jobs left from before: {listed}")
        if not work:
            return
        try:
            if self._prepare is not None:
                self._prepare()
        except (RuntimeError, OSError) as exc:
            hooks.fail([p for w in work for p in w.points], f"cannot deploy the runtime: {exc}")
            return
        queue = ConfigQueue(work, hooks.stop)
        threads = [
            threading.Thread(
                target=self._worker, args=(f"w{i}", host, queue, hooks), name=f"{host}-w{i}"
            )
            for i in range(min(self.policy.workers, len(work)))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        left = [p for w in queue.drain() for p in w.points]
        if left and not hooks.stop.is_set():
            why = "; ".join(dict.fromkeys(self.reasons[-3:])) or "every worker retired"
            hooks.fail(left, f"no Slurm worker left to run it: {why}")

    # ------------------------------------------------------------------ one worker

    def _worker(self, name: str, host: str, queue: ConfigQueue, hooks: WorkerHooks[Any]) -> None:
        held: _Held[B] | None = None
        first = True
        item: Work | None = None
        try:
            while not hooks.stop.is_set():
                if held is not None and held.allocation.lost:
                    hooks.progress.status(host, f"{name}: lost {held.allocation.lost}")
                    held.release(self.login)
                    held = None
                if held is None:
                    wait = self.policy.queue_wait_s if first else self.policy.replace_wait_s
                    first = False
                    allocation = self._acquire(name, host, queue, hooks, wait)
                    if allocation is None:
                        return
                    held = _Held(allocation, self.make_backend(allocation), self._watch(allocation))
                item = queue.take()
                if item is None:
                    return
                if self._too_short(name, host, held.allocation, item, hooks):
                    queue.give_back(item)
                    held.release(self.login)
                    item, held = None, None
                    continue
                stopped = self._run(name, host, queue, hooks, held, item)
                item = None
                if stopped:
                    return
        except Exception as exc:  # noqa: BLE001 - a worker's crash must not strand its config
            self.reasons.append(f"{name}: {type(exc).__name__}: {exc}")
            hooks.progress.status(host, f"{name}: error: {exc}")
            if item is not None:
                rest = [p for p in item.points if not hooks.recorded(p.point_id)]
                hooks.fail(queue.finish(item, rest), f"{name}: {exc}")
        finally:
            if held is not None:
                held.release(self.login)

    def _run(
        self,
        name: str,
        host: str,
        queue: ConfigQueue,
        hooks: WorkerHooks[Any],
        held: _Held[B],
        item: Work,
    ) -> bool:
        """Run one config on the held allocation; True when the sweep stops."""
        allocation = held.allocation
        hooks.progress.status(
            host, f"{name}: {item.label} on {allocation.node} (job {allocation.job})"
        )
        started = time.monotonic()
        outcome = hooks.run_step(held.backend, item, held.previous, queue.gate(item))
        if not outcome.unmeasured and not outcome.stopped:
            self.estimator.observe(item.step, time.monotonic() - started)
        failed = queue.finish(item, outcome.unmeasured)
        if failed:
            reason = allocation.lost or "its allocation ended"
            hooks.fail(failed, f"{reason} (the config lost its node {MAX_RELOCATIONS + 1} times)")
        if outcome.identity is not None:
            held.previous = outcome.identity
        return outcome.stopped

    def _too_short(
        self, name: str, host: str, allocation: Allocation, item: Work, hooks: WorkerHooks[Any]
    ) -> bool:
        """Whether the allocation would end inside this config (and has already served, so a
        fresh one could do better)."""
        if not allocation.configs:
            return False
        try:
            left = self.login.time_left(allocation.job)
        except HostError:
            return False  # squeue could not say: the watchdog notices a real end
        need = self.estimator.expected(item.step) + self.policy.time_margin_s
        if left is None or left >= need:
            return False
        hooks.progress.status(
            host,
            f"{name}: job {allocation.job} has {left:.0f} s left, {item.label} needs ~{need:.0f} s:"
            " replacing the allocation before it starts",
        )
        hooks.timing("replaced_short", 1)
        return True

    def _watch(self, allocation: Allocation) -> _Watchdog:
        return _Watchdog(self.login, allocation, self.policy.watch_s)

    def _acquire(
        self,
        name: str,
        host: str,
        queue: ConfigQueue,
        hooks: WorkerHooks[Any],
        deadline_s: float | None,
    ) -> Allocation | None:
        """Submit an allocation and wait for it to run: None when refused, past the deadline,
        when there is nothing left to run, or when the sweep stops (the request is cancelled)."""
        shown: tuple[str, float] | None = None

        def queued(job: str, line: JobLine, waited: float) -> None:
            nonlocal shown
            if shown is None or shown[0] != line.reason or waited - shown[1] > QUEUE_NOTE_S:
                why = f" ({line.reason})" if line.reason not in ("", "None") else ""
                hooks.progress.status(host, f"{name}: job {job} queued{why}")
                shown = (line.reason, waited)

        try:
            asked = allocate(
                self.login,
                deadline_s=deadline_s,
                poll_s=self.policy.poll_s,
                stop=hooks.stop,
                give_up=queue.finished,
                queued=queued,
            )
        except AllocationRefused as exc:
            self.reasons.append(str(exc))
            hooks.progress.status(host, f"{name}: {exc}")
            return None
        job, waited, allocation = asked.job, asked.waited, asked.allocation
        if allocation is not None:
            hooks.timing("queue_s", waited)
            hooks.timing("allocations", 1)
            hooks.progress.status(
                host, f"{name}: job {job} running on {allocation.node} after {waited:.1f} s queued"
            )
        elif asked.ended is not None:
            self.reasons.append(f"{name}: {asked.ended}")
        elif asked.late is not None:
            late = asked.late
            why = f"no node within {deadline_s:.0f} s (job {job} {late.state}: {late.reason})"
            self.reasons.append(f"{name}: {why}")
            hooks.progress.status(host, f"{name}: {why}; its configs go to the other workers")
        return allocation


class _Held(Generic[B]):
    """A worker's allocation with its backend, watchdog and last proven instance."""

    def __init__(self, allocation: Allocation, backend: B, watchdog: _Watchdog) -> None:
        self.allocation = allocation
        self.backend = backend
        self.watchdog = watchdog
        self.previous: Identity | None = None

    def release(self, login: SlurmLogin) -> None:
        """Cancel the allocation (its step ends with it)."""
        self.watchdog.close()
        if not self.allocation.lost:
            # The run's cleanup cancels every job of the run by name anyway.
            with contextlib.suppress(HostError, OSError):
                login.cancel(self.allocation.job)
