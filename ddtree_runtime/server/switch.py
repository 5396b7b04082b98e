"""Engines from configs, at start-up and in place: `POST /admin/switch` (docs/runtime-api.md).

`build_engine` is the one way an Engine is made from (LoadedModel, ServeConfig) and `warm` the one
warm-up, both for the engine a server starts with and for every engine a switch puts in its
place. A switch (`Switcher.switch`) holds new engine work at the `Gate`, waits until no request
is in flight, then, on the engine thread, lets the old engine go (its KV cache, captured graph,
drafter and request table with it) before the new one is built on the same weights and warmed
up; the state then takes the new config's identity and fresh counters. A fresh process does the
same after loading, so a point measured after a switch is the point measured on a fresh process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
from ddtree_runtime.models import LoadedModel
from ddtree_runtime.server.config import ServeConfig, SwitchRefused, switched
from ddtree_runtime.server.engine_loop import EngineLoop
from ddtree_runtime.server.phases import SWITCH, Phases
from ddtree_runtime.server.state import RuntimeState

log = logging.getLogger("ddtree_runtime.switch")

# How often a switch looks whether the requests in flight have finished.
DRAIN_POLL_S = 0.01
WARMUP_PROMPT = "Hello"


def build_engine(loaded: LoadedModel, config: ServeConfig) -> Engine:
    """An engine for `config` on `loaded`'s weights: its drafter made from `config.draft`, its
    settings the config's fields of the same names. ValueError for a drafter or setting that
    cannot be."""
    settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(EngineConfig)}
    return Engine(loaded, make_drafter(config.draft, loaded), EngineConfig(**settings))


def warm(engine: Engine) -> None:
    """A one-token greedy generation: the first verify (where a CUDA graph is captured) happens
    here, not in the first measured request. RuntimeError if it yields no token."""
    tokenizer = engine.loaded.tokenizer
    prompt = list(tokenizer.encode(WARMUP_PROMPT)) or [0]
    result = engine.generate([prompt], [SamplingParams(max_tokens=1, temperature=0.0)])[0]
    if not result.token_ids:
        raise RuntimeError("warm-up generation produced no token")


class _Released:
    """The engine loop's engine while one engine is let go and the next is built (on the engine
    thread, so nothing steps it): no work, takes none."""

    def add_request(self, request_id: str, prompt_ids: list[int], params: Any) -> None:
        raise RuntimeError("the engine is being rebuilt")

    def abort(self, request_id: str) -> None:
        """Nothing runs here to abort."""

    def has_work(self) -> bool:
        return False

    def step(self) -> list[Any]:
        return []


def rebuild(loop: EngineLoop, loaded: LoadedModel, config: ServeConfig, phases: Phases) -> None:
    """On the engine thread (`EngineLoop.call`): the loop's engine is let go first, so its memory
    (KV cache, graph) is free before the next is allocated; then one is built for `config`
    (phase `built`), warmed (`graphs_captured` where a graph is) and made the loop's. On failure
    the loop keeps no engine (`_Released`)."""
    loop.engine = _Released()
    engine = build_engine(loaded, config)
    phases.mark("built")
    warm(engine)
    if engine.forward.graph_captured_at is not None:
        phases.mark("graphs_captured", engine.forward.graph_captured_at)
    loop.engine = engine


class Gate:
    """Where new engine work waits while a switch runs (event-loop side); one switch at a time."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._switch = asyncio.Lock()

    async def enter(self) -> None:
        """Return once no switch holds the gate. The caller submits its work before its next
        await, so a switch that closes the gate after this sees that work in flight."""
        while not self._open.is_set():
            await self._open.wait()

    @contextlib.asynccontextmanager
    async def closed(self) -> AsyncIterator[None]:
        """The gate closed for one switch (a second switch waits behind it)."""
        async with self._switch:
            self._open.clear()
            try:
                yield
            finally:
                self._open.set()


class Switcher:
    """`POST /admin/switch`: see the module docstring."""

    def __init__(self, state: RuntimeState) -> None:
        self.state = state
        self.gate = Gate()

    async def switch(self, changes: object) -> dict[str, Any]:
        """Switch to the config `changes` asks for; the answer's body. SwitchRefused (a 400)
        for a body `switched` refuses, or a drafter that cannot be built (the old config is
        then built again, the same way, and serves)."""
        state = self.state
        async with self.gate.closed():
            config = switched(state.config, changes)
            phases = Phases(SWITCH, time.time(), log_prefix=None)
            phases.mark("started", phases.origin)
            while state.loop.in_flight():
                await asyncio.sleep(DRAIN_POLL_S)
            phases.mark("drained")
            try:
                await self._rebuild(config, phases)
            except ValueError as error:
                await self._restore()
                raise SwitchRefused(f"cannot build the engine: {error}", "draft") from error
            except Exception:
                await self._restore()
                raise
            phases.mark("ready")
            state.adopt(config, phases.as_dict())
        switch_s = time.time() - phases.origin
        log.info("switched to fingerprint=%s in %.2f s", state.fingerprint, switch_s)
        return {
            "fingerprint": state.fingerprint,
            "config": config.model_dump(),
            "switch_s": switch_s,
        }

    async def _rebuild(self, config: ServeConfig, phases: Phases) -> None:
        state = self.state
        await asyncio.wrap_future(
            state.loop.call(lambda: rebuild(state.loop, state.loaded, config, phases))
        )

    async def _restore(self) -> None:
        """After a failed switch: the config before it, as a fresh engine. If even that fails the
        server stops answering healthy (/health 503) and every request is refused."""
        try:
            await self._rebuild(self.state.config, Phases(SWITCH, time.time(), log_prefix=None))
        except Exception:
            self.state.ready = False
            log.exception("the config before a failed switch cannot be built again")
            raise
