"""A plan's points: a `Point` is one measurement, a request config (`sweeper.config`) against
a server config on a host, with the AR points it is compared with, how its sampled outputs are
proven (the check, who scores them, the samples it draws: `sampling.py` decides once, as the plan
is built, and whoever proves the point reads them here). Plain, frozen data with a stable id
(resume and every record rely on it); `model.py` orders them into a plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sweeper.config import RequestConfig, ServerConfig, point_id
from sweeper.spec.model import SampledCheck

#: Who scores a point's sampled outputs: its own server (`self`, as score records name it), or
#: the AR server started once more after the host's speculative configs (`ar`).
ScoredBy = Literal["self", "ar"]


@dataclass(frozen=True)
class Point:
    """One measurement: a request config against a server config on a host."""

    host: str
    server_config: ServerConfig
    request_config: RequestConfig
    #: The AR point this one is compared with (same host, flags, request config); None for AR.
    baseline_point_id: str | None = None
    #: The speed baseline's point (`runtime.speed_baseline`: same host, flags, request config).
    speed_baseline_point_id: str | None = None
    #: Its requests (or open-loop duration) are the workload's times this: a halving rung's > 1.
    length: int = 1
    #: How its sampled outputs are proven (`determinism.sampled`, `auto` resolved; None at
    #: temperature 0) and who scores them (None: nobody), as the plan decided
    #: (`sweeper.plan.sampling`).
    sampled_check: SampledCheck | None = None
    scored_by: ScoredBy | None = None
    #: The sample roles it draws for its sampled proof (`sweeper.plan.sampling`), how many per
    #: prompt and role (what its measured requests lack: `SampledChecks.provision`), and the
    #: point of the same server config whose samples it shares (same sampling, another load).
    samples: tuple[str, ...] = ()
    samples_per_prompt: int = 0
    samples_from: str | None = None

    @property
    def point_id(self) -> str:
        """Stable and readable, e.g. `local-b16-k4-bs8-cg1-t0-c1`; resume relies on it."""
        return point_id(self.host, self.server_config.label, self.request_config.id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_id": self.point_id,
            "host": self.host,
            "server_config": self.server_config.to_dict(),
            "request_config": self.request_config.to_dict(),
            "baseline_point_id": self.baseline_point_id,
            "speed_baseline_point_id": self.speed_baseline_point_id,
        } | (
            ({"length": self.length} if self.length != 1 else {})
            | ({"sampled_check": self.sampled_check} if self.sampled_check else {})
            | ({"scored_by": self.scored_by} if self.scored_by else {})
            | ({"samples": list(self.samples)} if self.samples else {})
            | ({"samples_per_prompt": self.samples_per_prompt} if self.samples else {})
            | ({"samples_from": self.samples_from} if self.samples_from else {})
        )
