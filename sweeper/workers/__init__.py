"""Several workers sharing one host's server configs: the data the runner and a worker pool pass.

The runner owns what happens to one config (`run_step`: start, readiness, identity, the points);
a pool owns which worker runs which config, when, and where. A local or SSH host is one worker
running its configs in plan order on its own backend (`InOrder`); a Slurm cluster has one worker
per allocation sharing the configs through a `ConfigQueue` (`slurm.py`, `queue.py`; an
allocation's request until it runs, shared with the doctor: `allocation.py`). Which host, service
and pool serve each host of the spec: `backends.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sweeper.plan import HostPlan, Point, Step
from sweeper.progress import SweepProgress
from sweeper.services.identity import Identity

B = TypeVar("B")


@dataclass
class Work:
    """One server config still to run on a host, with its points not yet recorded."""

    step: Step
    points: list[Point]
    #: How often it was handed back because the machine under it was lost.
    relocations: int = 0

    @property
    def label(self) -> str:
        return self.step.server_config.label


@dataclass(frozen=True)
class StepOutcome:
    """How one server config went on one worker."""

    #: The proven instance, when it started (the next start's "previous").
    identity: Identity | None = None
    #: The sweep is stopping (Ctrl-C): the worker ends.
    stopped: bool = False
    #: Points not measured and not failed: the machine under the server was lost (or the config
    #: gave way to its own baseline); they can run on another worker.
    unmeasured: tuple[Point, ...] = ()


@dataclass(frozen=True)
class WorkerHooks(Generic[B]):
    """What a worker pool may do through the runner."""

    #: Run one config on a backend: (backend, work, previous identity, gate) -> outcome. The gate
    #: is called after the server is proven and before the first point; False: measure nothing.
    run_step: Callable[[B, Work, Identity | None, Callable[[], bool] | None], StepOutcome]
    #: Record points as failed with a reason (no worker could run them).
    fail: Callable[[list[Point], str], None]
    #: Whether a point is recorded (done) in the run.
    recorded: Callable[[str], bool]
    progress: SweepProgress
    stop: threading.Event
    #: Add seconds (or a count) to a manifest timing of the host, e.g. "queue_s".
    timing: Callable[[str, float], None] = field(default=lambda _key, _value: None)


class Workers(Protocol):
    """A pool of workers for one host (see the module docstring)."""

    def run(self, host: str, work: list[Work], hooks: WorkerHooks[Any]) -> None:
        """Run every config of `work` on some worker; return when all are recorded, handed to
        `hooks.fail`, or the sweep stops."""
        ...


class InOrder(Generic[B]):
    """One worker: the host's own backend runs its configs in plan order (or as a search hands
    them out: `work` may be a generator that picks each config after the last one ran)."""

    def __init__(self, backend: B) -> None:
        self.backend = backend

    def run(self, host: str, work: Iterable[Work], hooks: WorkerHooks[Any]) -> None:
        previous: Identity | None = None
        for item in work:
            if hooks.stop.is_set():
                return
            outcome = hooks.run_step(self.backend, item, previous, None)
            if outcome.stopped:
                return
            previous = outcome.identity or previous


def pending_work(
    host_plan: HostPlan, done: Container[str], settled: Container[str] = ()
) -> list[Work]:
    """The host's server configs in plan order, each with its points not yet recorded; a
    scoring restart with the points it scores whose verdict is not yet settled."""
    points = list(host_plan.points())
    work = []
    for step in host_plan.steps:
        sc = step.server_config
        if step.scoring:
            pending = [p for p in host_plan.scored_by(step) if p.point_id not in settled]
        else:
            pending = [p for p in points if p.server_config.id == sc.id and p.point_id not in done]
        if pending:
            work.append(Work(step, pending))
    return work
