"""How the load pool collects its workers' messages: a worker that reported and then ended is
never taken for dead, however late its report arrives; one that ended silently is, by name."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from sweeper.measure.pool import LAST_WORDS_S, _collect


class LateQueue(queue.Queue):
    """A queue whose puts arrive `delay_s` after `put` returns, as a multiprocessing queue's
    feeder thread may deliver them after the putting worker is gone."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        threading.Timer(self.delay_s, super().put, args=(item,)).start()


def ended_worker(results: queue.Queue, message: tuple[Any, ...] | None) -> threading.Thread:
    """A worker thread that puts `message` (if any) and ends; returned once it has ended."""

    def report() -> None:
        if message is not None:
            results.put(message)

    worker = threading.Thread(target=report, name="sweeper-load-0")
    worker.start()
    worker.join()
    return worker


def test_a_report_that_arrives_after_its_worker_ended_is_collected() -> None:
    # Later than `_collect`'s own poll (0.5 s), well inside LAST_WORDS_S.
    results = LateQueue(delay_s=1.0)
    worker = ended_worker(results, ("done", 0, ["record"], "stats"))
    assert not worker.is_alive()
    assert _collect(results, [worker], "done", None) == [(0, ["record"], "stats")]


def test_a_worker_that_ended_without_reporting_is_named() -> None:
    results: queue.Queue = queue.Queue()
    worker = ended_worker(results, None)
    with pytest.raises(RuntimeError, match="load worker sweeper-load-0 ended .* before reporting"):
        _collect(results, [worker], "done", None)
    assert LAST_WORDS_S < 30  # the silent worker's point fails in seconds, not at a timeout
