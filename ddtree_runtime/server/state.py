"""What a running server knows about itself: config, identity, model, engine loop and live stats.

`server_info()` is the body of `GET /server_info`, the sweeper's proof of which configuration
answers (see README "Runtime HTTP API").
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ddtree_runtime import __version__
from ddtree_runtime.server.config import ServeConfig, fingerprint, fingerprint_inputs
from ddtree_runtime.server.engine_loop import EngineLoop

REQUEST_STAT_FIELDS = (
    "verify_rounds",
    "accepted_tokens",
    "emitted_tokens",
    "tau",
    "draft_s",
    "tree_s",
    "verify_s",
    "commit_s",
)


def request_stats_dict(stats: Any) -> dict[str, Any]:
    """An engine RequestStats as the `ddtree` extension field."""
    return {name: getattr(stats, name) for name in REQUEST_STAT_FIELDS}


@dataclass
class LiveStats:
    """Totals since start, updated only on the event-loop thread."""

    requests: int = 0
    aborted: int = 0
    failed: int = 0
    verify_rounds: int = 0
    accepted_tokens: int = 0
    emitted_tokens: int = 0

    def record(self, stats: dict[str, Any]) -> None:
        self.requests += 1
        self.verify_rounds += int(stats["verify_rounds"])
        self.accepted_tokens += int(stats["accepted_tokens"])
        self.emitted_tokens += int(stats["emitted_tokens"])

    def as_dict(self, in_flight: int, engine_steps: int) -> dict[str, Any]:
        tau = self.emitted_tokens / self.verify_rounds if self.verify_rounds else 0.0
        return {
            "requests": self.requests,
            "aborted": self.aborted,
            "failed": self.failed,
            "in_flight": in_flight,
            "engine_steps": engine_steps,
            "verify_rounds": self.verify_rounds,
            "accepted_tokens": self.accepted_tokens,
            "emitted_tokens": self.emitted_tokens,
            "tau": tau,
        }


@dataclass
class RuntimeState:
    config: ServeConfig
    loaded: Any  # models.LoadedModel
    engine: Any  # engine.Engine
    loop: EngineLoop
    source_hash: str
    start_time: float = field(default_factory=time.time)
    ready: bool = False
    stats: LiveStats = field(default_factory=LiveStats)

    def __post_init__(self) -> None:
        self.fingerprint_inputs = fingerprint_inputs(
            self.config, self.loaded.weights_hash, self.source_hash
        )
        self.fingerprint = fingerprint(self.fingerprint_inputs)

    def server_info(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(),
            "fingerprint": self.fingerprint,
            "fingerprint_inputs": self.fingerprint_inputs,
            "launch_id": self.config.launch_id,
            "runtime_version": __version__,
            "source_hash": self.source_hash,
            "pid": os.getpid(),
            "start_time": self.start_time,
            "ready": self.ready,
            "model": {
                "name": self.loaded.name,
                "served_model_name": self.config.served_model_name,
                "weights_hash": self.loaded.weights_hash,
            },
            "device": self.config.device,
            "engine": dict(getattr(self.engine, "info", {}) or {}),
            "stats": self.stats.as_dict(self.loop.in_flight(), self.loop.steps),
        }
