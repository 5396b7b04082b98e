"""Which server config next: the plain strategies (grid, random, halving) and the factory.

A strategy is asked for the next step and told each step's score; it never measures anything
nor checks `search.stop` (the driver does both). Asking again for a config already measured costs
no restart: the driver tells its recorded score at once.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Protocol

from sweeper.analysis.objective import Score
from sweeper.plan import Step
from sweeper.plan.rungs import next_rung
from sweeper.search.space import Space, params_key
from sweeper.spec.search import SearchSpec


class Strategy(Protocol):
    """Proposes steps (server configs to start) one at a time."""

    def ask(self) -> Step | None:
        """The next step, or None when the strategy has nothing more to try."""
        ...

    def tell(self, step: Step, result: Score) -> None:
        """The score of a step asked for (all its restarts so far, together)."""
        ...


class InOrder:
    """`grid` (plan order) and `random` (a seeded shuffle of it)."""

    def __init__(self, space: Space, shuffle_seed: int | None = None) -> None:
        self.queue = list(space.candidates)
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(self.queue)

    def ask(self) -> Step | None:
        return self.queue.pop(0) if self.queue else None

    def tell(self, step: Step, result: Score) -> None:
        pass


class Halving:
    """Successive halving over restarts: every candidate once (a seeded order, so a `stop` cut
    is a random subset) with the workload's measurement, then the best 1/eta of the feasible ones
    on a fresh restart each, measured eta times longer (`length`), their score now the mean of
    both, and so on until one is left. Each rung thus sends about as many requests as the first
    (1/eta of the configs, eta times the requests each): short measurements for all, longer
    for the best fraction, where the noise of a short one would decide."""

    def __init__(self, space: Space, search: SearchSpec) -> None:
        self.eta, self.goal = search.eta, search.objective.goal
        self.rung = 0
        self.members = list(space.candidates)
        random.Random(search.seed).shuffle(self.members)
        self.queue = list(self.members)
        self.scores: dict[tuple[object, ...], Score] = {}

    def ask(self) -> Step | None:
        if not self.queue and not self._promote():
            return None
        step = self.queue.pop(0)
        if not self.rung:
            return step
        sc = step.server_config.again(self.rung)
        return Step(sc, step.request_configs)

    def tell(self, step: Step, result: Score) -> None:
        self.scores[params_key(step.server_config.params)] = result

    def length(self, step: Step) -> int:
        """How many times the workload's measurement a step's points take: eta^rung."""
        return int(self.eta**step.server_config.restart)

    def _promote(self) -> bool:
        ranked = [
            (score.value, step)
            for step in self.members
            if (score := self.scores.get(params_key(step.server_config.params))) is not None
            and score.state == "ok"
            and score.value is not None
        ]
        keep = next_rung(len(ranked), self.eta)  # the plan's bound counts the same rungs
        if keep is None or keep >= len(self.members):
            return False
        ranked.sort(key=lambda pair: pair[0], reverse=self.goal == "maximize")
        self.members = [step for _, step in ranked[:keep]]
        self.rung += 1
        self.queue = list(self.members)
        return True


def make_strategy(space: Space, search: SearchSpec, storage: Path | None, name: str) -> Strategy:
    """The spec's strategy over this space; `storage` keeps TPE's study (None: in memory)."""
    if search.strategy == "grid":
        return InOrder(space)
    if search.strategy == "random":
        return InOrder(space, search.seed)
    if search.strategy == "halving":
        return Halving(space, search)
    from sweeper.search.tpe import Tpe  # optuna loads in ~1 s: only when a study is wanted

    return Tpe(space, search, storage, name)
