"""Per-request engine statistics, and the clock that times the stages of a verify round.

A verify round's stages are timed once for the whole batch (``StageClock``); every request in the
round is charged the full time of each stage, since it waited for all of it. Stat names are the
keys of the ``ddtree`` extension field (README "Runtime HTTP API").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

# Timed stages of a round: "tree" covers building the trees and writing their mask, "verify" the
# target forward and the walk, "commit" the KV commit and emitting the tokens.
STAGES = ("draft", "tree", "verify", "commit")


class StageClock:
    """Seconds per stage of one verify round: ``with clock.stage("draft"): ...`` adds to it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if name not in self.seconds:
            raise KeyError(f"unknown stage {name!r}; stages are {STAGES}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start


@dataclass
class RequestStats:
    verify_rounds: int = 0
    accepted_tokens: int = 0
    emitted_tokens: int = 0
    tau: float = 0.0
    draft_s: float = 0.0
    tree_s: float = 0.0
    verify_s: float = 0.0
    commit_s: float = 0.0

    def add_round(self, seconds: Mapping[str, float]) -> None:
        """Count one verify round (after its tokens were emitted) and charge its stage times."""
        self.verify_rounds += 1
        self.draft_s += seconds["draft"]
        self.tree_s += seconds["tree"]
        self.verify_s += seconds["verify"]
        self.commit_s += seconds["commit"]
        self.tau = self.emitted_tokens / self.verify_rounds
