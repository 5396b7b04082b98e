"""The `search:` section: find the best server config instead of measuring every one.

A *trial* is one speculative server config: one restart, every request config measured on it.
`strategy` picks the order (`grid`: plan order; `random`: a seeded shuffle; `tpe`: Optuna's
Tree-structured Parzen Estimator, its study kept in the run directory so `--resume` continues it;
`halving`: successive halving, every config measured once, the best 1/eta again on a fresh
restart measured eta times longer, and so on). `objective` is a point column, averaged over the
named request configs (`at`, default all of a trial's) and over restarts. Temperature-0 exactness
is a hard constraint that cannot be turned off: a trial with a determinism violation (diverged,
nondeterministic, garbled) is infeasible whatever its speed. `constraints.slo` adds the spec's
SLO. `stop` ends the search after so many restarts (the AR baseline's included) or hours,
whichever comes first. (It was once called `budget`; that word now means only the tree budget, a
grid key, and `search: {budget: ...}` is refused with a pointer to `stop`.)
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, model_validator

from sweeper.results.records import CONFIG_COLUMNS, PointKey, PointRecord
from sweeper.spec.base import Int, NonEmptyStr, Number, StrictModel
from sweeper.spec.errors import problem

Strategy = Literal["grid", "random", "tpe", "halving"]
Goal = Literal["maximize", "minimize"]


def numeric_point_columns() -> list[str]:
    """The point columns an objective may name: numbers a point record carries."""
    numeric = ("float", "int")
    configs = {*PointKey.model_fields, *CONFIG_COLUMNS}  # what a point is, not what it measured
    return [
        name
        for name, info in PointRecord.model_fields.items()
        if any(kind in str(info.annotation) for kind in numeric)
        and "list" not in str(info.annotation)
        and name not in configs
    ]


class ObjectiveSpec(StrictModel):
    """What a trial scores: `column` (a point column), its `goal`, at which request configs."""

    column: NonEmptyStr = "output_tok_s"
    goal: Goal = "maximize"
    #: Request config ids (`t0-c8`, `t0-r2`); empty: every request config of the trial.
    at: list[NonEmptyStr] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_column(self) -> ObjectiveSpec:
        if self.column not in numeric_point_columns():
            examples = "output_tok_s, speedup, e2e_speedup, goodput_rps, ttft_p90"
            message = f"{self.column!r} is not a numeric point column (e.g. {examples})"
            raise problem(message, at=("column",))
        return self


class ConstraintsSpec(StrictModel):
    """Constraints beyond exactness (which is always on and cannot be listed here)."""

    #: The trial must meet the spec's `slo` at the objective's request configs.
    slo: StrictBool = False


class SearchStop(StrictModel):
    """When to stop: after this many restarts (the AR baseline's included) or hours."""

    restarts: Annotated[Int, Field(ge=1)] | None = None
    hours: Annotated[Number, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _something(self) -> SearchStop:
        if self.restarts is None and self.hours is None:
            raise problem("stop needs restarts or hours (leave stop out for no limit)")
        return self


class SearchSpec(StrictModel):
    """How to search the grid's speculative server configs (see the module docstring)."""

    strategy: Strategy = "grid"
    objective: ObjectiveSpec = Field(default_factory=ObjectiveSpec)
    constraints: ConstraintsSpec = Field(default_factory=ConstraintsSpec)
    #: None: until the strategy has tried every config it wants.
    stop: SearchStop | None = None
    #: Seeds the random order, TPE's sampler and halving's first rung (numpy's range: 0 to
    #: 2^32 - 1).
    seed: Annotated[Int, Field(ge=0, le=2**32 - 1)] = 0
    #: TPE: random trials before the model takes over.
    startup_trials: Annotated[Int, Field(ge=1)] = 4
    #: Halving: keep the best 1/eta of each rung for the next.
    eta: Annotated[Int, Field(ge=2, le=10)] = 3

    @model_validator(mode="before")
    @classmethod
    def _budget_was_renamed(cls, data: Any) -> Any:
        """`search.budget` is the old name of `search.stop`: refused with the new name, not as
        an unknown key, since "budget" now means only the tree budget (a grid key)."""
        if isinstance(data, dict) and "budget" in data:
            raise problem(
                "renamed to 'stop': write stop: {restarts: N, hours: H} (either or both); "
                "'budget' now means only the tree budget, a grid key",
                at=("budget",),
            )
        return data
