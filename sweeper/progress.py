"""Live progress of a sweep: one rich line per host (points done/total, current config, ETA,
tok/s), or plain log lines when the output is not a terminal. The runner calls these hooks from
its host threads; both implementations are thread-safe."""

from __future__ import annotations

import threading
import time
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class SweepProgress(Protocol):
    """What the runner reports while it works (and a context that shows it while open)."""

    def __enter__(self) -> SweepProgress: ...
    def __exit__(self, *exc: object) -> None: ...
    def host_started(self, host: str, total: int, done: int) -> None: ...
    def planned_more(self, host: str, points: int) -> None: ...
    def status(self, host: str, text: str) -> None: ...
    def tokens(self, host: str, n: int) -> None: ...
    def point_done(self, host: str, point_id: str, status: str, detail: str) -> None: ...
    def host_done(self, host: str) -> None: ...


class _Rate:
    """Output tokens per second over the current point."""

    def __init__(self) -> None:
        self.tokens = 0
        self.since = time.monotonic()

    def reset(self) -> None:
        self.tokens, self.since = 0, time.monotonic()

    def value(self) -> float:
        return self.tokens / max(time.monotonic() - self.since, 1e-6)


class RichProgress:
    """A rich progress display with a task per host; use as a context manager."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, markup=False)
        self._progress = Progress(
            TextColumn("{task.fields[host]}", style="bold", markup=False),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[rate]:>7.1f} tok/s  {task.fields[current]}", markup=False),
            console=self.console,
        )
        self._tasks: dict[str, TaskID] = {}
        self._rates: dict[str, _Rate] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def host_started(self, host: str, total: int, done: int) -> None:
        with self._lock:
            self._rates[host] = _Rate()
            self._tasks[host] = self._progress.add_task(
                host, total=total, completed=done, host=host, rate=0.0, current="starting"
            )

    def planned_more(self, host: str, points: int) -> None:
        """`points` more than the plan's on `host` (a winner confirmed on a fresh process)."""
        with self._lock:
            task = self._tasks[host]
            total = next(t.total for t in self._progress.tasks if t.id == task) or 0
            self._progress.update(task, total=total + points)

    def status(self, host: str, text: str) -> None:
        with self._lock:
            self._rates[host].reset()
            self._progress.update(self._tasks[host], current=text, rate=0.0)

    def tokens(self, host: str, n: int) -> None:
        with self._lock:
            rate = self._rates[host]
            rate.tokens += n
            self._progress.update(self._tasks[host], rate=rate.value())

    def point_done(self, host: str, point_id: str, status: str, detail: str) -> None:
        colour = "green" if status == "ok" else "red"
        with self._lock:
            self._progress.advance(self._tasks[host])
            # Text, never markup: the detail holds data (an error, a category).
            line = Text(f"{status:6}", style=colour) + Text(f" {point_id}  {detail}")
            self._progress.console.print(line)

    def host_done(self, host: str) -> None:
        with self._lock:
            self._progress.update(self._tasks[host], current="done")


class PlainProgress:
    """One line per event, for logs and tests (never wrapped: a log line stays one line)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, highlight=False, markup=False)
        self._lock = threading.Lock()
        self._done: dict[str, list[int]] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def host_started(self, host: str, total: int, done: int) -> None:
        with self._lock:
            self._done[host] = [done, total]
            self.console.print(f"{host}: {done}/{total} points already done", soft_wrap=True)

    def planned_more(self, host: str, points: int) -> None:
        """`points` more than the plan's on `host` (a winner confirmed on a fresh process)."""
        with self._lock:
            self._done[host][1] += points

    def status(self, host: str, text: str) -> None:
        with self._lock:
            self.console.print(f"{host}: {text}", soft_wrap=True)

    def tokens(self, host: str, n: int) -> None:
        return None

    def point_done(self, host: str, point_id: str, status: str, detail: str) -> None:
        with self._lock:
            counts = self._done[host]
            counts[0] += 1
            line = f"{host}: [{counts[0]}/{counts[1]}] {status} {point_id} {detail}"
            self.console.print(line, soft_wrap=True)

    def host_done(self, host: str) -> None:
        return None
