"""One host's server configs shared by its workers: take the next, hand back what could not run,
hold a speculative config's points until its AR baseline is recorded, and a scoring restart
until the configs whose samples it scores are.

Configs leave in plan order (AR baselines first). A config whose machine was lost goes back to
the front with its unmeasured points, so a surviving worker runs it next; after
`MAX_RELOCATIONS` such returns its points are failed instead (a config that keeps losing its
node must not go round forever). A speculative config measures only once every AR config with
its baseline key is done, since its determinism verdicts compare with the baseline's tokens: a
worker that started one waits at the gate while the baseline runs elsewhere, and gives it back
(to the end of the queue) when the baseline sits in the queue with no worker on it, so it never
waits for work only it could do.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from sweeper.plan import Point
from sweeper.workers import Work

MAX_RELOCATIONS = 2
#: Seconds between looks at the stop event while waiting.
WAIT_S = 0.5


class ConfigQueue:
    """The queue of one host's configs (see the module docstring); thread-safe."""

    def __init__(self, work: Sequence[Work], stop: threading.Event) -> None:
        self._queued: deque[Work] = deque(work)
        self._running: list[Work] = []
        self._yielded: set[int] = set()
        self._stop = stop
        self._cond = threading.Condition()

    def take(self) -> Work | None:
        """The next config; waits while none is queued but some run elsewhere (they may come
        back). None when everything is done or the sweep stops."""
        with self._cond:
            while not self._stop.is_set():
                if self._queued:
                    item = self._queued.popleft()
                    self._running.append(item)
                    return item
                if not self._running:
                    return None
                self._cond.wait(WAIT_S)
            return None

    def give_back(self, item: Work) -> None:
        """A config taken but not started (its worker must first replace its allocation)."""
        with self._cond:
            self._running.remove(item)
            self._queued.appendleft(item)
            self._cond.notify_all()

    def finish(self, item: Work, unmeasured: Sequence[Point]) -> list[Point]:
        """The worker is done with `item`; `unmeasured` points go back to the queue. Returns the
        points that must be failed instead (handed back too often)."""
        with self._cond:
            self._running.remove(item)
            yielded = id(item) in self._yielded
            self._yielded.discard(id(item))
            failed: list[Point] = []
            if unmeasured:
                rest = Work(item.step, list(unmeasured), item.relocations + (0 if yielded else 1))
                if yielded:
                    self._queued.append(rest)
                elif rest.relocations > MAX_RELOCATIONS:
                    failed = list(unmeasured)
                else:
                    self._queued.appendleft(rest)
            self._cond.notify_all()
            return failed

    def finished(self) -> bool:
        """Nothing queued and nothing running."""
        with self._cond:
            return not self._queued and not self._running

    def drain(self) -> list[Work]:
        """Take every queued config out (no worker is left to run them)."""
        with self._cond:
            left = list(self._queued)
            self._queued.clear()
            self._cond.notify_all()
            return left

    def gate(self, item: Work) -> Callable[[], bool] | None:
        """For a speculative config: a wait until its AR baselines are done; for a scoring
        restart, until every config whose points it scores is. True: measure (score) now;
        False: the sweep stops, or the config was given back to let what it waits for run."""
        sc = item.step.server_config
        if sc.mode == "ar" and not item.step.scoring:
            return None
        key = sc.baseline_key
        scored = {p.server_config.id for p in item.points}

        def waits_for(other: Work) -> bool:
            if other is item or other.step.scoring:
                return False
            if item.step.scoring:
                return other.step.server_config.id in scored
            return (
                other.step.server_config.mode == "ar"
                and other.step.server_config.baseline_key == key
            )

        def baselines(items: Sequence[Work]) -> list[Work]:
            return [w for w in items if waits_for(w)]

        def wait() -> bool:
            with self._cond:
                while not self._stop.is_set():
                    running, queued = baselines(self._running), baselines(self._queued)
                    if not running and not queued:
                        return True
                    if queued and not running:
                        self._yielded.add(id(item))
                        return False
                    self._cond.wait(WAIT_S)
                return False

        return wait
