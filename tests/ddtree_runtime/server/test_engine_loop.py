"""The engine thread's hand-off, with a scripted stand-in engine so faults can be injected: events
reach the right request, a failing step fails only the requests in it and the loop goes on,
abort and stop end requests."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from ddtree_runtime.server.engine_loop import EngineFailure, EngineLoop


@dataclass
class Event:
    request_id: str
    token_ids: list[int]
    finished: bool


class ScriptedEngine:
    """Emits one token per step per request, finishing after `length` tokens."""

    def __init__(self, length: int = 3) -> None:
        self.length = length
        self.active: dict[str, int] = {}
        self.aborted: list[str] = []
        self.fail_next_step = False
        self.lock = threading.Lock()
        self.gate = threading.Event()  # steps wait for it, so tests control the pace
        self.gate.set()
        self.stepping = threading.Event()  # set as a step starts (and waits for the gate)

    def add_request(self, request_id: str, prompt_ids: list[int], params: Any) -> None:
        if not prompt_ids:
            raise ValueError("empty prompt")
        with self.lock:
            self.active[request_id] = 0

    def abort(self, request_id: str) -> None:
        with self.lock:
            self.aborted.append(request_id)
            self.active.pop(request_id, None)

    def has_work(self) -> bool:
        with self.lock:
            return bool(self.active)

    def step(self) -> list[Event]:
        self.stepping.set()
        self.gate.wait(5)
        with self.lock:
            if self.fail_next_step:
                self.fail_next_step = False
                raise RuntimeError("injected fault")
            events = []
            for request_id in list(self.active):
                self.active[request_id] += 1
                done = self.active[request_id] >= self.length
                events.append(Event(request_id, [self.active[request_id]], done))
                if done:
                    del self.active[request_id]
            return events


class Collector:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.done = threading.Event()

    def __call__(self, item: Any) -> None:
        self.items.append(item)
        if isinstance(item, EngineFailure) or item.finished:
            self.done.set()


def test_events_reach_their_own_request_until_finished() -> None:
    engine = ScriptedEngine(length=3)
    loop = EngineLoop(engine)
    loop.start()
    a, b = Collector(), Collector()
    loop.submit("a", [1], None, a)
    loop.submit("b", [1], None, b)
    assert a.done.wait(5) and b.done.wait(5)
    assert [e.token_ids for e in a.items] == [[1], [2], [3]]
    assert all(e.request_id == "b" for e in b.items) and len(b.items) == 3
    assert loop.in_flight() == 0
    loop.stop()


def test_client_error_from_engine_propagates_and_leaves_nothing_behind() -> None:
    loop = EngineLoop(ScriptedEngine())
    loop.start()
    with pytest.raises(ValueError):
        loop.submit("bad", [], None, Collector())
    assert loop.in_flight() == 0
    loop.stop()


def test_failed_step_fails_its_requests_and_the_loop_goes_on() -> None:
    engine = ScriptedEngine(length=3)
    engine.fail_next_step = True
    loop = EngineLoop(engine)
    first = Collector()
    loop.submit("first", [1], None, first)
    loop.start()
    assert first.done.wait(5)
    assert isinstance(first.items[-1], EngineFailure)
    assert first.items[-1].status == 500
    assert "first" in engine.aborted
    second = Collector()
    loop.submit("second", [1], None, second)
    assert second.done.wait(5)
    assert [e.token_ids for e in second.items] == [[1], [2], [3]]
    loop.stop()


def test_abort_stops_delivery_and_stop_fails_the_rest_with_503() -> None:
    engine = ScriptedEngine(length=1000)
    engine.gate.clear()
    loop = EngineLoop(engine)
    loop.start()
    gone, waiting = Collector(), Collector()
    loop.submit("gone", [1], None, gone)
    loop.submit("waiting", [1], None, waiting)
    loop.abort("gone")
    assert engine.aborted == ["gone"] and loop.in_flight() == 1
    loop.stop(join_timeout=0)
    engine.gate.set()
    assert waiting.done.wait(5)
    assert isinstance(waiting.items[-1], EngineFailure) and waiting.items[-1].status == 503
    assert gone.items == []
    with pytest.raises(RuntimeError):  # a stopped loop refuses new requests
        loop.submit("late", [1], None, Collector())


def test_a_call_runs_on_the_engine_thread_between_steps_never_during_one() -> None:
    """A scoring prefill uses the model the steps use: it must run on their thread, between
    two steps; its exception comes back to its caller; a stopping loop fails what waits."""
    engine = ScriptedEngine(length=1000)
    engine.gate.clear()  # the first step blocks until released
    loop = EngineLoop(engine)
    loop.start()
    loop.submit("busy", [1], None, Collector())
    seen: list[tuple[str, bool]] = []

    def work() -> str:
        seen.append((threading.current_thread().name, engine.lock.locked()))
        return "scored"

    assert engine.stepping.wait(5)
    future = loop.call(work)
    assert not future.done()  # the step in progress holds the thread
    engine.gate.set()
    assert future.result(5) == "scored"
    assert seen == [("ddtree-engine", False)]
    failing = loop.call(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(5)
    loop.stop()
    idle = EngineLoop(ScriptedEngine())  # never started: what it was asked still waits
    blocked = idle.call(lambda: "never")
    idle.stop(join_timeout=0)
    with pytest.raises(EngineFailure):
        blocked.result(5)
    with pytest.raises(RuntimeError):
        idle.call(lambda: "late")
