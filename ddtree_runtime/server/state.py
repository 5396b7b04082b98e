"""What a running server knows about itself: config, identity, model, engine loop and live stats.

`server_info()` is the body of `GET /server_info`, the sweeper's proof of which configuration
answers (docs/runtime-api.md). A switch (`server.switch`) replaces the loop's engine and then
`adopt`s its config: the identity follows it and the live counters start again.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ddtree_runtime import __version__
from ddtree_runtime.algo.processors import LOGIT_ORDER, REPETITION_SCOPE
from ddtree_runtime.score import ORDER
from ddtree_runtime.server.config import ServeConfig, fingerprint, fingerprint_inputs
from ddtree_runtime.server.engine_loop import EngineLoop
from ddtree_runtime.server.limits import RequestLimits, longest_token_chars
from ddtree_runtime.server.phases import Phases
from ddtree_runtime.stats import TOTALLED, RequestStats

#: How this runtime samples (``algo.sampling``), so a controller knows it may compare sampled output
#: with AR's at the same seed token for token. Describes the code, not a flag: not fingerprinted.
SAMPLING: dict[str, Any] = {
    "coupled": True,
    "uniform": "splitmix64(seed, absolute position) -> [0, 1), 53 bits",
    "inverse_cdf": "token-id order, after temperature, min-p, top-k, top-p",
    "sample_margins": "logprobs: chat content[i].sample_margin, completions sample_margins",
}


#: How this runtime scores a sampled continuation (`POST /score`, `ddtree_runtime.score`): the
#: exact processed distribution (the sampler's own code), in its order of steps: the logit
#: processors (`logit_order`, the repetition penalty over `repetition_scope`), then temperature
#: and the cuts (`order`). Describes the code, not a flag: not fingerprinted.
SCORING: dict[str, Any] = {
    "route": "/score",
    "basis": "exact",
    "logit_order": list(LOGIT_ORDER),
    "repetition_scope": REPETITION_SCOPE,
    "order": list(ORDER),
}


def request_stats_dict(stats: RequestStats) -> dict[str, Any]:
    """An engine RequestStats as the `ddtree` extension field (its fields, in their order)."""
    return dataclasses.asdict(stats)


@dataclass
class LiveStats:
    """Totals since start, updated only on the event-loop thread."""

    requests: int = 0
    aborted: int = 0
    failed: int = 0
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOTALLED, 0))
    accepted_hist: list[int] = field(default_factory=list)

    def record(self, stats: dict[str, Any]) -> None:
        """Add one finished request's `ddtree` stats."""
        self.requests += 1
        for name in TOTALLED:
            self.totals[name] += int(stats[name])
        hist = stats["accepted_hist"]
        self.accepted_hist.extend([0] * (len(hist) - len(self.accepted_hist)))
        for accepted, rounds in enumerate(hist):
            self.accepted_hist[accepted] += int(rounds)

    def as_dict(self, in_flight: int, engine_steps: int) -> dict[str, Any]:
        rounds, emitted = self.totals["verify_rounds"], self.totals["emitted_tokens"]
        return {
            "requests": self.requests,
            "aborted": self.aborted,
            "failed": self.failed,
            "in_flight": in_flight,
            "engine_steps": engine_steps,
            **self.totals,
            "tau": emitted / rounds if rounds else 0.0,
            "accepted_hist": list(self.accepted_hist),
        }


@dataclass
class RuntimeState:
    config: ServeConfig
    loaded: Any  # models.LoadedModel
    loop: EngineLoop
    source_hash: str
    startup: Phases
    start_time: float = field(default_factory=time.time)
    ready: bool = False
    stats: LiveStats = field(default_factory=LiveStats)
    switches: int = 0
    last_switch: dict[str, float | None] | None = None

    def __post_init__(self) -> None:
        self._identify()
        # Switches keep max_model_len and the tokenizer: the limits are the process's.
        self.limits = RequestLimits(
            self.config.max_model_len, longest_token_chars(self.loaded.tokenizer)
        )

    @property
    def engine(self) -> Any:
        """The engine serving now (engine.Engine): the loop's."""
        return self.loop.engine

    def _identify(self) -> None:
        self.fingerprint_inputs = fingerprint_inputs(
            self.config, self.loaded.weights_hash, self.source_hash
        )
        self.fingerprint = fingerprint(self.fingerprint_inputs)

    def adopt(self, config: ServeConfig, phases: dict[str, float | None]) -> None:
        """After a switch to `config` (its engine already the loop's): its identity, counters
        from zero, and the switch's phases."""
        self.config = config
        self._identify()
        self.stats = LiveStats()
        self.switches += 1
        self.last_switch = phases

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
            "startup": self.startup.as_dict(),
            "switches": self.switches,
            "last_switch": self.last_switch,
            "model": {
                "name": self.loaded.name,
                "served_model_name": self.config.served_model_name,
                "weights_hash": self.loaded.weights_hash,
            },
            "device": self.config.device,
            "engine": dict(getattr(self.engine, "info", {}) or {}),
            "sampling": dict(SAMPLING),
            "scoring": dict(SCORING),
            "limits": self.limits.as_dict(),
            "stats": self.stats.as_dict(self.loop.in_flight(), self.loop.steps),
        }
