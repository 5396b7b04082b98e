"""The plan's data: per host the ordered restarts (`Step`: a server config and the request
configs measured against it), the points they make, which of them draw samples, and the plan's
totals and rough time estimate. The configs and points themselves are `configs.py`; `build.py`
expands a spec's grid into a `Plan`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from sweeper.config import SPEED_BASELINE, RequestConfig, ServerConfig, point_id, short_hash
from sweeper.plan.points import Point
from sweeper.plan.rungs import rung_sizes
from sweeper.plan.sampling import SPECULATIVE_ROLES, SampledChecks
from sweeper.spec import HostSpec, Spec, WorkloadSpec

#: Rough figures for `estimate_seconds` when nothing better is known (CPU, smollm2-135m).
DEFAULT_LOAD_S = 10.0
DEFAULT_TOK_S = 12.0


def with_samples(points: list[Point], baseline_roles: tuple[str, ...]) -> list[Point]:
    """The points with the samples they draw: at temperature > 0 every speculative point, and
    every AR point some speculative point is compared with (`baseline_roles`); the first point
    of a server config and sampling key draws, the others at other loads share its samples
    (`samples_from`)."""
    wanted = {
        (p.server_config.baseline_key, p.request_config.sampling_key)
        for p in points
        if p.server_config.mode != "ar" and p.request_config.temperature > 0
    }
    first: dict[tuple[str, tuple[Any, ...]], str] = {}
    out = []
    for point in points:
        sc, rc = point.server_config, point.request_config
        ar = sc.mode == "ar"
        if rc.temperature <= 0 or (ar and (sc.baseline_key, rc.sampling_key) not in wanted):
            out.append(point)
            continue
        key = (sc.id, rc.sampling_key)
        if key in first:
            out.append(replace(point, samples_from=first[key]))
        else:
            first[key] = point.point_id
            out.append(replace(point, samples=baseline_roles if ar else SPECULATIVE_ROLES))
    return out


class Step(NamedTuple):
    """One restart on a host: a server config and the request configs measured against it; or
    (`scoring`) an AR server started again after the speculative configs to score their
    samples (`sweeper.plan.sampling`), measuring nothing."""

    server_config: ServerConfig
    request_configs: tuple[RequestConfig, ...]
    scoring: bool = False


@dataclass(frozen=True)
class HostPlan:
    """Everything one host runs, in order (AR configs first)."""

    host: HostSpec
    steps: tuple[Step, ...]
    #: How its sampled points are proven, as the plan resolved it; its points carry it.
    checks: SampledChecks = SampledChecks()

    @property
    def name(self) -> str:
        return self.host.name

    def points(self) -> Iterator[Point]:
        yield from self.carrying(list(self._points()))

    def carrying(self, points: list[Point]) -> list[Point]:
        """The points with the checks they carry (`SampledChecks.carried`) and the samples
        they draw (`with_samples`, where sampled points draw)."""
        carried = [self.checks.carried(p) for p in points]
        roles = self.checks.baseline_roles
        return with_samples(carried, roles) if roles else carried

    def scored_by(self, step: Step) -> list[Point]:
        """The points whose samples a scoring step scores: those that wait for the AR server
        (none for another step)."""
        return [p for p in self.points() if p.scored_by == "ar"] if step.scoring else []

    def _points(self) -> Iterator[Point]:
        baselines = {
            (step.server_config.baseline_key, rc.comparison_key): point_id(
                self.name, step.server_config.label, rc.id
            )
            for step in self.steps
            if step.server_config.mode == "ar"
            for rc in step.request_configs
        }
        for step in self.steps:
            sc = step.server_config
            for rc in step.request_configs:
                baseline = speed = None
                if sc.mode != "ar":
                    baseline = baselines.get((sc.baseline_key, rc.comparison_key))
                    restart = {"restart": sc.restart} if sc.restart else {}
                    speed_key = short_hash({**sc.flags, SPEED_BASELINE: True, **restart})
                    speed = baselines.get((speed_key, rc.comparison_key))
                yield Point(self.name, sc, rc, baseline, speed)


@dataclass(frozen=True)
class Plan:
    """A spec expanded: per host the ordered restarts, plus notes on what was dropped and why."""

    spec: Spec
    hosts: tuple[HostPlan, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def restarts(self) -> int:
        """Restarts per host, summed over hosts: its server configs, plus at most what a
        halving search's later rungs add (`sweeper.plan.rungs`): an upper bound."""
        return sum(len(host.steps) + self._extra(host).restarts for host in self.hosts)

    @property
    def n_points(self) -> int:
        """Points, with at most what a halving search's later rungs add: an upper bound."""
        return sum(
            sum(len(step.request_configs) for step in host.steps) + self._extra(host).points
            for host in self.hosts
        )

    def _extra(self, host: HostPlan) -> Extra:
        return halving_extra(host, self.spec, DEFAULT_LOAD_S, DEFAULT_TOK_S)

    def points(self) -> Iterator[Point]:
        for host in self.hosts:
            yield from host.points()

    @property
    def n_requests(self) -> int:
        """Measured requests (warmup excluded); an open loop's duration counts rate x duration."""
        workload = self.spec.workload
        return sum(
            point_requests_count(rc, workload)
            for host in self.hosts
            for step in host.steps
            for rc in step.request_configs
        )

    @property
    def n_samples(self) -> int:
        """Seeded samples its distribution tests draw (never timed; `sweeper.plan.sampling`)."""
        return sum(samples_count(p, self.spec) for p in self.points())

    @property
    def n_scores(self) -> int:
        """Scoring requests (one prefill each): every sample where the run scores, a coupled
        server's sampled measured requests, and each scorer's rescoring of the AR samples
        that proves its agreement (`scores_count`)."""
        return sum(scores_count(host, self.spec) for host in self.hosts)

    @property
    def estimated_seconds(self) -> float:
        """A rough estimate with the default figures; see `estimate_seconds`."""
        return estimate_seconds(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "restarts": self.restarts,
            "n_points": self.n_points,
            "n_requests": self.n_requests,
            **({"n_samples": n} if (n := self.n_samples) else {}),
            **({"n_scores": n} if (n := self.n_scores) else {}),
            "estimated_seconds": round(self.estimated_seconds, 1),
            "notes": list(self.notes),
            "hosts": [
                {
                    "host": host.name,
                    "steps": [
                        {
                            "server_config": step.server_config.to_dict(),
                            "label": step.server_config.label,
                            "request_configs": [rc.to_dict() for rc in step.request_configs],
                            **({"scoring": True} if step.scoring else {}),
                        }
                        for step in host.steps
                    ],
                    "points": [p.to_dict() for p in host.points()],
                }
                for host in self.hosts
            ],
        }


def point_requests_count(rc: RequestConfig, workload: WorkloadSpec) -> int:
    """How many requests a point offers: prompts x repeats, or an open loop's `requests`, or
    about rate x `duration_s` (the schedule decides the exact number)."""
    load = workload.load
    if rc.rate is None or load is None or (load.requests is None and load.duration_s is None):
        return len(workload.prompts) * workload.repeats
    if load.requests is not None:
        return load.requests
    assert load.duration_s is not None  # rate inf with a duration is refused by the spec
    return max(1, round(rc.rate * load.duration_s))


def samples_count(point: Point, spec: Spec) -> int:
    """The seeded samples one point draws: per role, `determinism.samples` per prompt."""
    return len(point.samples) * len(spec.workload.prompts) * spec.determinism.samples


def samples_seconds(point: Point, spec: Spec, *, tok_s: float = DEFAULT_TOK_S) -> float:
    """Drawing one point's samples: rounds of `sample_concurrency` samples, each of
    `sample_length` tokens (batching assumed free, as `step_seconds` assumes)."""
    policy = spec.determinism
    n = samples_count(point, spec)
    rounds = math.ceil(n / policy.sample_concurrency) if n else 0
    return rounds * policy.sample_length(point.request_config.max_tokens) / tok_s


#: One scoring request (a prefill of prompt + sample) counted as this many decode steps of one
#: stream: a prefill of ~100 tokens costs a few decode steps on a CPU, about one on a GPU.
SCORE_STEPS = 3.0


def scores_count(host: HostPlan, spec: Spec) -> int:
    """The scoring requests one host sends: each sample its scored points draw, or (coupled)
    their sampled measured requests, and one AR sample per prompt and AR point rescored by each
    scorer other than the AR itself (the agreement check: the scoring restarts, and each
    speculative config that scores its own)."""
    points = list(host.points())
    scored = [p for p in points if p.scored_by]
    n = sum(samples_count(p, spec) for p in scored)
    if not n:  # coupled: the sampled measured requests
        n = sum(point_requests_count(p.request_config, spec.workload) for p in scored)
    controls = [p for p in points if p.server_config.mode == "ar" and "control" in p.samples]
    own = {
        p.server_config.id for p in scored if p.server_config.mode != "ar" and p.scored_by == "self"
    }
    scorers = sum(s.scoring for s in host.steps) + len(own)
    return n + scorers * len(controls) * len(spec.workload.prompts)


def scores_seconds(host: HostPlan, spec: Spec, *, tok_s: float = DEFAULT_TOK_S) -> float:
    """One host's scoring requests: rounds of `sample_concurrency`, `SCORE_STEPS` each."""
    n = scores_count(host, spec)
    return math.ceil(n / spec.determinism.sample_concurrency) * SCORE_STEPS / tok_s


def estimate_seconds(
    plan: Plan, *, load_s: float = DEFAULT_LOAD_S, tok_s: float = DEFAULT_TOK_S
) -> float:
    """An estimate, not a promise: hosts run in parallel, so the slowest host's sum of
    `step_seconds` over its restarts, plus its samples' (`samples_seconds`) and their scoring
    (`scores_seconds`)."""
    return max(
        (
            sum(step_seconds(plan.spec, step, load_s=load_s, tok_s=tok_s) for step in host.steps)
            + sum(samples_seconds(p, plan.spec, tok_s=tok_s) for p in host.points())
            + scores_seconds(host, plan.spec, tok_s=tok_s)
            + halving_extra(host, plan.spec, load_s, tok_s).seconds
            for host in plan.hosts
        ),
        default=0.0,
    )


def proof_seconds(
    plan: Plan, *, load_s: float = DEFAULT_LOAD_S, tok_s: float = DEFAULT_TOK_S
) -> float:
    """What the sampled proof adds, summed over hosts: drawing samples, scoring them, and the
    scoring restarts (`SampledChecks.ar_scores_speculative`)."""
    spec = plan.spec
    return sum(
        sum(samples_seconds(p, spec, tok_s=tok_s) for p in host.points())
        + scores_seconds(host, spec, tok_s=tok_s)
        + load_s * sum(step.scoring for step in host.steps)
        for host in plan.hosts
    )


def step_seconds(
    spec: Spec, step: Step, *, load_s: float = DEFAULT_LOAD_S, tok_s: float = DEFAULT_TOK_S
) -> float:
    """One restart: `load_s` plus warmup and, per point, rounds of `concurrency` requests each
    taking max_tokens / `tok_s` (no speedup assumed, batching assumed free); an open loop lasts
    its schedule (requests / rate, or its duration) plus one request. A scoring restart
    measures nothing: its load alone (its scoring is `scores_seconds`)."""
    workload = spec.workload
    per_request = workload.max_tokens / tok_s
    if step.scoring:
        return load_s
    total = load_s + workload.warmup * per_request
    for rc in step.request_configs:
        n_requests = point_requests_count(rc, workload)
        if rc.rate is None:
            total += math.ceil(n_requests / (rc.concurrency or 1)) * per_request
            continue
        span = workload.load.duration_s if workload.load else None
        if span is None:
            span = 0.0 if math.isinf(rc.rate) else n_requests / rc.rate
        total += span + per_request
    return total


class Extra(NamedTuple):
    """What a host's halving rungs past the first add at most."""

    restarts: int = 0
    points: int = 0
    seconds: float = 0.0


def halving_extra(host: HostPlan, spec: Spec, load_s: float, tok_s: float) -> Extra:
    """The later rungs' restarts, points and time on one host (nothing without halving)."""
    search = spec.search
    if search is None or search.strategy != "halving":
        return Extra()
    candidates = [
        s for s in host.steps if s.server_config.mode != "ar" and s.server_config.restart == 0
    ]
    if not candidates:
        return Extra()
    widest = max(candidates, key=lambda s: step_seconds(spec, s, load_s=load_s, tok_s=tok_s))
    whole = step_seconds(spec, widest, load_s=load_s, tok_s=tok_s)
    measured = whole - load_s - spec.workload.warmup * spec.workload.max_tokens / tok_s
    extra = Extra()
    for rung, size in enumerate(rung_sizes(len(candidates), search.eta)[1:], start=1):
        seconds = size * (whole - measured + measured * search.eta**rung)
        points = size * len(widest.request_configs)
        extra = Extra(extra.restarts + size, extra.points + points, extra.seconds + seconds)
    return extra
