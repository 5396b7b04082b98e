"""The `slo:` section: latency targets a request must meet to count as good (goodput).

Each target is judged per request on its own figures: TTFT, its mean inter-token latency
(e2e - ttft) / (output_tokens - 1) (vLLM's TPOT), and E2E. A point meets the SLO when at least
`attainment` of its offered requests meet every target that is set, so `attainment: 0.99`
reads "TTFT p99 <= ttft_s and ITL p99 <= itl_s" with the same 99% of requests meeting both
(`sweeper.analysis.goodput` has the definitions).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from sweeper.spec.base import Number, StrictModel
from sweeper.spec.errors import problem

_Seconds = Annotated[Number, Field(gt=0)]


class SloSpec(StrictModel):
    """Per-request targets in seconds (unset: not checked) and the share that must meet them."""

    ttft_s: _Seconds | None = None
    itl_s: _Seconds | None = None
    e2e_s: _Seconds | None = None
    attainment: Annotated[Number, Field(gt=0, le=1)] = 0.99

    @model_validator(mode="after")
    def _some_target(self) -> SloSpec:
        if self.ttft_s is None and self.itl_s is None and self.e2e_s is None:
            raise problem("an SLO needs at least one of ttft_s, itl_s, e2e_s")
        return self
