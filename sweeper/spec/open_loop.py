"""The workload's `load:` section: open-loop points, sent at a request rate rather than held at
a concurrency; and the type of one rate (a number > 0 requests per second, or `inf`).

Every rate of the list is its own point, a request parameter like temperature: never a restart.
The arrival process follows vLLM's `bench serve`: gaps between arrivals are exponential for
`poisson`, fixed at 1/rate for `constant`, gamma with shape `burstiness` for `gamma` (below 1
burstier than Poisson, above 1 more regular). `rate: inf` sends every request at once. The
schedule of a point is drawn once from the workload's `seed` (0 when unset), the same for every
server config measured at that rate. A point lasts `duration_s` (every arrival inside the
window) or `requests` arrivals; with neither it offers each prompt `repeats` times, as a
closed-loop point does. Requests still in flight `grace_s` after the window are cancelled and
count as SLO misses. `max_concurrency` bounds what is in flight across all client processes
(an arrival waits for a free slot, as in vLLM's bench).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
    model_validator,
)

from sweeper.spec.base import Int, Number, StrictModel
from sweeper.spec.errors import problem

Arrival = Literal["poisson", "constant", "gamma"]
_INF_WORDS = ("inf", ".inf", "infinity", "+inf")


def _rate_in(value: Any) -> Any:
    """A rate as YAML gives it: a number, or `inf` (YAML's `.inf` or the word); never a bool."""
    if isinstance(value, bool):
        raise problem("a rate is a number of requests per second or inf, not a bool")
    if isinstance(value, str):
        if value.strip().lower() in _INF_WORDS:
            return math.inf
        raise problem(f"a rate is a number of requests per second or inf, not {value!r}")
    return value


def _rate_out(value: float) -> float | str:
    """`inf` as the word in JSON (a manifest's spec), since JSON has no infinity."""
    return "inf" if math.isinf(value) else value


#: Bounds of an open loop: below them a point would measure nothing (or take days), above them
#: a number is a typo (a 300-digit estimate, an "infinity to integer" crash later).
MIN_RATE, MAX_DURATION_S, MAX_REQUESTS, MAX_GRACE_S = 1e-3, 86_400, 1_000_000, 3_600

#: Requests per second, at least MIN_RATE (one every ~17 min), or infinity (all at once).
Rate = Annotated[
    float,
    BeforeValidator(_rate_in),
    Field(ge=MIN_RATE),
    PlainSerializer(_rate_out, when_used="json"),
]


class LoadSpec(StrictModel):
    """Open-loop points: one per rate, with one arrival process and length for all."""

    rate: list[Rate] = Field(min_length=1)
    arrival: Arrival = "poisson"
    #: The gamma shape (gamma arrivals only): 1 is Poisson, below 1 burstier.
    burstiness: Annotated[Number, Field(ge=0.01, le=100)] = 1.0
    #: How long arrivals come (seconds); or `requests` arrivals; neither: prompts x repeats.
    duration_s: Annotated[Number, Field(ge=0.1, le=MAX_DURATION_S)] | None = None
    requests: Annotated[Int, Field(ge=1, le=MAX_REQUESTS)] | None = None
    #: At most this many requests in flight, across every client process.
    max_concurrency: Annotated[Int, Field(ge=1)] | None = None
    #: Seconds requests in flight at the end of `duration_s` may still take.
    grace_s: Annotated[Number, Field(ge=0, le=MAX_GRACE_S)] = 30.0

    @model_validator(mode="after")
    def _consistent(self) -> LoadSpec:
        for index, rate in enumerate(self.rate):
            if rate in self.rate[:index]:
                raise problem(f"duplicate rate {rate:g}", at=("rate", index))
            if math.isinf(rate) and self.duration_s is not None:
                message = (
                    "rate inf sends every arrival at once, so a duration would be an unbounded "
                    "number of requests; give 'requests' instead of 'duration_s'"
                )
                raise problem(message, at=("rate", index))
        if "burstiness" in self.model_fields_set and self.arrival != "gamma":
            message = (
                f"burstiness applies to arrival: gamma only (poisson is gamma with burstiness 1, "
                f"constant has none), not {self.arrival}"
            )
            raise problem(message, at=("burstiness",))
        if self.duration_s is not None and self.requests is not None:
            raise problem("give duration_s or requests, not both", at=("requests",))
        if "grace_s" in self.model_fields_set and self.duration_s is None:
            message = "grace_s follows the end of duration_s; without a duration it does nothing"
            raise problem(message, at=("grace_s",))
        return self
