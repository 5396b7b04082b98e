"""`tpe`: Optuna's Tree-structured Parzen Estimator over the grid's speculative configs.

Each grid key is a categorical axis. The study lives in the run directory (a journal file,
append-only like the records), so `--resume` reloads it: a trial left running by the interrupted
run is failed (its points, if recorded, are told again when it is asked again). Exactness is
Optuna's constraint (`Trial.set_constraint`): an infeasible trial keeps its value but ranks below
every feasible one, so the model learns where the wrong-but-fast region is without ever calling
it best. A combination the plan dropped (topk > budget, an exclude rule) is told infeasible at
no cost; a config asked again is told its recorded score without a restart.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import Trial, TrialState

from sweeper.analysis.objective import Score
from sweeper.plan import Step
from sweeper.search.space import Space, params_key
from sweeper.spec.search import SearchSpec

#: Asks in a row that name nothing new before the next untried config is taken directly.
_STUCK_AFTER = 25
#: The constraint's name: above zero is infeasible (Optuna's rule).
_CONSTRAINT = "exactness"


class Tpe:
    """A study whose trials are the space's candidates."""

    def __init__(self, space: Space, search: SearchSpec, storage: Path | None, name: str) -> None:
        optuna.logging.set_verbosity(logging.WARNING)
        self.space = space
        self.axes: dict[str, BaseDistribution] = {
            k: CategoricalDistribution(v) for k, v in space.axes().items()
        }
        self.by_params = space.by_params()
        self.goal = search.objective.goal
        self.random = random.Random(search.seed)
        sampler = TPESampler(seed=search.seed, n_startup_trials=search.startup_trials)
        backend = JournalStorage(JournalFileBackend(str(storage))) if storage else None
        self.study = optuna.create_study(
            storage=backend,
            sampler=sampler,
            study_name=name,
            direction=self.goal,
            load_if_exists=True,
        )
        self.known: dict[tuple[object, ...], Score] = {}
        self.asked: dict[str, Trial] = {}
        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.study.tell(trial.number, state=TrialState.FAIL)  # interrupted: asked anew

    def ask(self) -> Step | None:
        if len(self.known) >= len(self.by_params):
            return None
        for _ in range(_STUCK_AFTER):
            trial = self.study.ask(self.axes)
            step = self.by_params.get(params_key(trial.params))
            if step is None:  # a combination the plan dropped: not a server anyone can start
                self._finish(trial, 0.0, feasible=False)
                continue
            known = self.known.get(params_key(trial.params))
            if known is not None:  # asked again: its score is known, no restart
                self._tell_score(trial, known)
                continue
            self.asked[step.server_config.id] = trial
            return step
        untried = [s for k, s in self.by_params.items() if k not in self.known]
        step = self.random.choice(untried)
        self.study.enqueue_trial(dict(step.server_config.params))
        self.asked[step.server_config.id] = self.study.ask(self.axes)
        return step

    def tell(self, step: Step, result: Score) -> None:
        self.known[params_key(step.server_config.params)] = result
        trial = self.asked.pop(step.server_config.id, None)
        if trial is None:
            return
        self._tell_score(trial, result)

    def _tell_score(self, trial: Trial, result: Score) -> None:
        if result.value is None:
            self.study.tell(trial, state=TrialState.FAIL)
            return
        trial.set_user_attr("state", result.state)
        self._finish(trial, result.value, feasible=result.state == "ok")

    def _finish(self, trial: Trial, value: float, *, feasible: bool) -> None:
        trial.set_constraint(_CONSTRAINT, 0.0 if feasible else 1.0)
        self.study.tell(trial, value)

    def remember(self, step: Step, result: Score) -> None:
        """A config whose points the run already holds (resume): known without asking."""
        self.known[params_key(step.server_config.params)] = result
