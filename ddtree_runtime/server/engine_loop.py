"""The one background thread that drives the engine, and the hand-off of its events to requests.

Every request registers a *sink* (a thread-safe callable) and is added to the engine; the thread
runs `engine.step()` while there is work, so requests that arrive together are verified together
(continuous batching), and hands each TokenEvent to its request's sink. When there is no work it
sleeps on a condition that `submit` and `stop` signal. Other work on the model (a scoring prefill:
`call`) runs on the same thread between steps, so it never races a step for the model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

log = logging.getLogger("ddtree_runtime.engine_loop")


class EngineFailure(Exception):
    """A request ended without finishing: the engine raised (500) or the server is stopping
    (503). Its message is for the client."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


T = TypeVar("T")

# A sink gets TokenEvents, or an EngineFailure (after which it gets nothing more).
Sink = Callable[[Any], None]


class StepEngine(Protocol):
    def add_request(self, request_id: str, prompt_ids: list[int], params: Any) -> None: ...
    def abort(self, request_id: str) -> None: ...
    def has_work(self) -> bool: ...
    def step(self) -> list[Any]: ...


class EngineLoop:
    """Owns the engine thread; `submit`/`abort` may be called from any thread."""

    def __init__(self, engine: StepEngine) -> None:
        self.engine = engine
        self._wake = threading.Condition()
        self._sinks: dict[str, Sink] = {}
        self._calls: list[tuple[Callable[[], Any], Future[Any]]] = []
        self._stopping = False
        # Engine steps that did work: fewer than the requests' summed verify rounds when requests
        # were verified together (continuous batching), which /server_info shows.
        self.steps = 0
        self._thread = threading.Thread(target=self._run, name="ddtree-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, request_id: str, prompt_ids: list[int], params: Any, sink: Sink) -> None:
        """Queue a request; ValueError (a client error) from the engine propagates."""
        with self._wake:
            if self._stopping:
                raise RuntimeError("server is shutting down")
            self._sinks[request_id] = sink
            try:
                self.engine.add_request(request_id, prompt_ids, params)
            except BaseException:
                del self._sinks[request_id]
                raise
            self._wake.notify()

    def call(self, work: Callable[[], T]) -> Future[T]:
        """Run `work` on the engine thread before its next step; its result (or exception)
        comes back in the future. RuntimeError when the server is stopping."""
        future: Future[T] = Future()
        with self._wake:
            if self._stopping:
                raise RuntimeError("server is shutting down")
            self._calls.append((work, future))
            self._wake.notify()
        return future

    def abort(self, request_id: str) -> None:
        """Stop a request's work (client gone); its sink gets nothing more."""
        with self._wake:
            if self._sinks.pop(request_id, None) is not None:
                self.engine.abort(request_id)

    def in_flight(self) -> int:
        with self._wake:
            return len(self._sinks)

    def stop(self, join_timeout: float = 5.0) -> None:
        """Abort whatever is left (its clients get a 503 failure) and end the thread; waits up
        to `join_timeout` seconds for a step in progress (0: do not wait)."""
        with self._wake:
            self._stopping = True
            for request_id in list(self._sinks):
                self.engine.abort(request_id)
                self._sinks.pop(request_id)(EngineFailure("server is shutting down", status=503))
            for _, future in self._calls:
                future.set_exception(EngineFailure("server is shutting down", status=503))
            self._calls.clear()
            self._wake.notify()
        if join_timeout > 0 and self._thread.is_alive():
            self._thread.join(join_timeout)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and not self._calls and not self.engine.has_work():
                    self._wake.wait()
                if self._stopping:
                    return
                calls, self._calls = self._calls, []
            for work, future in calls:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(work())
                    except Exception as error:  # noqa: BLE001 - the caller gets it
                        future.set_exception(error)
            if not self.engine.has_work():
                continue
            try:
                events = self.engine.step()
            except Exception as error:  # noqa: BLE001 - one bad step must not kill the server
                log.exception("engine step failed; failing its requests")
                self._fail_all(EngineFailure(f"engine step failed: {error}"))
                continue
            if events:
                self.steps += 1
            self._deliver(events)

    def _deliver(self, events: list[Any]) -> None:
        for event in events:
            with self._wake:
                sink = self._sinks.get(event.request_id)
                if sink is not None and event.finished:
                    del self._sinks[event.request_id]
            if sink is not None:
                sink(event)

    def _fail_all(self, failure: EngineFailure) -> None:
        with self._wake:
            failed = list(self._sinks.items())
            self._sinks.clear()
            for request_id, _ in failed:
                self.engine.abort(request_id)
        for _, sink in failed:
            sink(failure)
