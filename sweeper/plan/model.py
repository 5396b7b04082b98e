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
from sweeper.plan.sampling import SPECULATIVE_ROLES, Provision, SampledChecks
from sweeper.spec import HostSpec, Spec, WorkloadSpec

#: Rough figures for `estimate_seconds` when nothing better is known (CPU, smollm2-135m).
DEFAULT_LOAD_S = 10.0
DEFAULT_TOK_S = 12.0
#: Seconds of one in-place switch of the bundled runtime (smollm2-135m on CPU; docs/spec.md's
#: in-place section says how it was measured).
DEFAULT_SWITCH_S = 0.5


def with_samples(points: list[Point], checks: SampledChecks) -> list[Point]:
    """The points with the samples they draw: at temperature > 0 every speculative point, and
    every AR point some speculative point is compared with (`checks.baseline_roles`), as many
    per prompt as their measured requests lack (`SampledChecks.provision`); the first point of a
    server config and sampling key draws what the neediest of them lacks, the others at other
    loads share its samples (`samples_from`); where none lacks any, none draws."""
    wanted = {
        (p.server_config.baseline_key, p.request_config.sampling_key)
        for p in points
        if p.server_config.mode != "ar" and p.request_config.temperature > 0
    }
    workload = checks.workload

    def draws(point: Point) -> bool:
        sc, rc = point.server_config, point.request_config
        ar = sc.mode == "ar"
        return rc.temperature > 0 and (not ar or (sc.baseline_key, rc.sampling_key) in wanted)

    def lacks(point: Point) -> int:
        requests = point_requests_count(point.request_config, workload) if workload else 0
        return checks.provision(point, requests * point.length).extra

    extra: dict[tuple[str, tuple[Any, ...]], int] = {}
    for point in filter(draws, points):
        key = (point.server_config.id, point.request_config.sampling_key)
        extra[key] = max(extra.get(key, 0), lacks(point))
    first: dict[tuple[str, tuple[Any, ...]], str] = {}
    out = []
    for point in points:
        key = (point.server_config.id, point.request_config.sampling_key)
        if not draws(point) or not extra[key]:
            out.append(point)
        elif key in first:
            out.append(replace(point, samples_from=first[key]))
        else:
            first[key] = point.point_id
            ar = point.server_config.mode == "ar"
            roles = checks.baseline_roles if ar else SPECULATIVE_ROLES
            out.append(replace(point, samples=roles, samples_per_prompt=extra[key]))
    return out


class Step(NamedTuple):
    """One server config on a host: the request configs measured against it; or (`scoring`)
    an AR server served again after the speculative configs to score their samples
    (`sweeper.plan.sampling`), measuring nothing. `switch`: the running server is switched to
    it in place (`sweeper.plan.loads`); otherwise it is a load (a fresh process)."""

    server_config: ServerConfig
    request_configs: tuple[RequestConfig, ...]
    scoring: bool = False
    switch: bool = False


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

    @property
    def loads(self) -> int:
        """Its steps that start a fresh process (`Step.switch` false). Where several Slurm
        allocations share the host's configs, each may load a group another one also loads:
        a load group of n configs counts up to min(n, allocations) loads (an upper bound)."""
        workers = getattr(self.host, "allocations", 1)
        groups: list[int] = []
        for step in self.steps:
            if step.switch and groups:
                groups[-1] += 1
            else:
                groups.append(1)
        return sum(min(n, workers) for n in groups)

    def points(self) -> Iterator[Point]:
        yield from self.carrying(list(self._points()))

    def carrying(self, points: list[Point]) -> list[Point]:
        """The points with the checks they carry (`SampledChecks.carried`) and the samples
        they draw (`with_samples`, where sampled points draw)."""
        carried = [self.checks.carried(p) for p in points]
        return with_samples(carried, self.checks) if self.checks.baseline_roles else carried

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

    @property
    def loads(self) -> int:
        """Fresh processes (loads of the target's weights) over every host, with at most what
        a halving search's later rungs add (each a fresh restart): an upper bound."""
        return sum(host.loads + self._extra(host).restarts for host in self.hosts)

    @property
    def switches(self) -> int:
        """In-place switches over every host: its server configs that are not loads."""
        return self.restarts - self.loads

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
            "loads": self.loads,
            "switches": self.switches,
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
                            **({"switch": True} if step.switch else {}),
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
    """The seeded samples one point draws: per role, `samples_per_prompt` per prompt."""
    return len(point.samples) * len(spec.workload.prompts) * point.samples_per_prompt


def provision_of(point: Point, spec: Spec) -> Provision:
    """What the point's sampled proof needs, what its measured requests give and what it draws
    beside them, per prompt (`SampledChecks.provision`)."""
    requests = point_requests_count(point.request_config, spec.workload) * point.length
    return SampledChecks.of(spec).provision(point, requests)


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
    """The scoring requests one host sends: each sample its scored points draw and each of
    their sampled measured requests, and one output per prompt of each AR point they are
    judged beside, rescored by each scorer other than the AR itself (the agreement check: the
    scoring restarts, and each speculative config that scores its own)."""
    points = list(host.points())
    scored = [p for p in points if p.scored_by]
    n = sum(
        samples_count(p, spec) + point_requests_count(p.request_config, spec.workload) * p.length
        for p in scored
    )
    by_id = {p.point_id: p for p in points}
    controls = {
        source.samples_from or source.point_id
        for p in scored
        if p.server_config.mode != "ar" and (source := by_id.get(p.baseline_point_id or ""))
    }
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
    plan: Plan,
    *,
    load_s: float = DEFAULT_LOAD_S,
    tok_s: float = DEFAULT_TOK_S,
    switch_s: float = DEFAULT_SWITCH_S,
) -> float:
    """An estimate, not a promise: hosts run in parallel, so the slowest host's sum of
    `step_seconds` over its server configs, plus its samples' (`samples_seconds`), their
    scoring (`scores_seconds`) and the winner's confirmation (`confirmation`)."""
    return max(
        (
            sum(step_seconds(plan.spec, s, load_s=load_s, tok_s=tok_s, switch_s=switch_s)
                for s in host.steps)
            + sum(samples_seconds(p, plan.spec, tok_s=tok_s) for p in host.points())
            + scores_seconds(host, plan.spec, tok_s=tok_s)
            + halving_extra(host, plan.spec, load_s, tok_s).seconds
            + confirmation(host, plan.spec, load_s, tok_s).seconds
            for host in plan.hosts
        ),
        default=0.0,
    )  # fmt: skip


class ProofTime(NamedTuple):
    """What the sampled proof adds, summed over hosts, in seconds: drawing the samples the
    measured requests lack, scoring every sampled output, and the scoring restarts."""

    drawing: float
    scoring: float
    restarts: float

    @property
    def total(self) -> float:
        return self.drawing + self.scoring + self.restarts


def proof_time(
    plan: Plan,
    *,
    load_s: float = DEFAULT_LOAD_S,
    tok_s: float = DEFAULT_TOK_S,
    switch_s: float = DEFAULT_SWITCH_S,
) -> ProofTime:
    """What the sampled proof adds (`ProofTime`): the samples drawn beside the measured
    requests (`samples_seconds`), their scoring (`scores_seconds`) and the scoring steps' loads
    or switches (`SampledChecks.ar_scores_speculative`)."""
    spec = plan.spec
    return ProofTime(
        sum(samples_seconds(p, spec, tok_s=tok_s) for host in plan.hosts for p in host.points()),
        sum(scores_seconds(host, spec, tok_s=tok_s) for host in plan.hosts),
        sum(
            switch_s if step.switch else load_s
            for host in plan.hosts
            for step in host.steps
            if step.scoring
        ),
    )


def step_seconds(
    spec: Spec,
    step: Step,
    *,
    load_s: float = DEFAULT_LOAD_S,
    tok_s: float = DEFAULT_TOK_S,
    switch_s: float = DEFAULT_SWITCH_S,
) -> float:
    """One server config: `load_s` (`switch_s` for an in-place switch) plus warmup and, per
    point, rounds of `concurrency` requests each taking max_tokens / `tok_s` (no speedup
    assumed, batching assumed free); an open loop lasts its schedule (requests / rate, or its
    duration) plus one request. A scoring step measures nothing: its start alone (its scoring
    is `scores_seconds`)."""
    workload = spec.workload
    per_request = workload.max_tokens / tok_s
    start = switch_s if step.switch else load_s
    if step.scoring:
        return start
    total = start + workload.warmup * per_request
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


def confirmation(host: HostPlan, spec: Spec, load_s: float, tok_s: float) -> Extra:
    """What confirming the host's winner on a fresh process adds, where its speculative
    configs are switched to (`sweeper.runner.sweep`: the answer names no config measured only
    after switches): one load and the widest such config's points again. One per host, the
    usual case; a host whose load levels have different winners confirms each."""
    switched = [
        s for s in host.steps if s.switch and not s.scoring and s.server_config.mode != "ar"
    ]
    if not switched or spec.search is not None:
        return Extra()
    widest = max(switched, key=lambda s: len(s.request_configs))
    fresh = widest._replace(switch=False)
    seconds = step_seconds(spec, fresh, load_s=load_s, tok_s=tok_s)
    return Extra(1, len(widest.request_configs), seconds)
