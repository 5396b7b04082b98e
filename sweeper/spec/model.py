"""The whole spec (`Spec`): hosts, runtime, grid, workload, the determinism policy and the
latency SLO that goodput is judged by."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, field_validator, model_validator

from sweeper.catalog.effective import effective, why
from sweeper.catalog.records import RECORDS
from sweeper.config import SERVER_KEYS, SPECULATIVE_KEYS
from sweeper.spec.base import Int, NonEmptyStr, Number, Slug, StrictModel
from sweeper.spec.errors import problem, problems
from sweeper.spec.grid import GridSpec
from sweeper.spec.hosts import HostSpec, LocalHostSpec, SlurmHostSpec, SSHHostSpec, host_shorthand
from sweeper.spec.reference import ReferenceSpec
from sweeper.spec.runtime import RuntimeSpec
from sweeper.spec.search import SearchSpec
from sweeper.spec.slo import SloSpec
from sweeper.spec.workload import WorkloadSpec

#: How a point at temperature > 0 is proven, once `auto` is resolved (`sweeper.plan.sampling`).
SampledCheck = Literal["coupled", "scored", "distribution", "repeats"]


class DeterminismSpec(StrictModel):
    """When a difference from the AR baseline is numerics and when it is a bug."""

    #: A greedy divergence where the baseline's top-1 minus top-2 logprob is below this, in
    #: nats, is a near tie. Unset: the engine's own calibrated margin
    #: (`sweeper.proof.scored.catalog`, written on each request record); an engine with none has
    #: no near ties.
    near_tie_margin: Annotated[Number, Field(ge=0)] | None = None
    #: Output is garbled when its garble score exceeds the baseline's by more than this...
    garble_margin: Annotated[Number, Field(ge=0, le=1)] = 0.15
    #: ...and is at least this (so clean text that differs a little is never "garbled").
    garble_min_score: Annotated[Number, Field(ge=0, le=1)] = 0.2
    #: Characters of text shown either side of a divergence.
    excerpt_chars: Annotated[Int, Field(ge=1)] = 40
    #: How a point at temperature > 0 is proven (`sweeper.plan.sampling`): `coupled` (token
    #: for token against AR at the same seed; needs a server that advertises coupled sampling;
    #: its sampled outputs are also scored beside it where the server scores), `scored` (every
    #: token of `samples` seeded samples per prompt scored by the target's own prefill: a token
    #: outside the processed distribution is a proof, and their PITs must be uniform; the AR
    #: point's own samples, scored alike, are the false-alarm control), `distribution` (a
    #: two-sample test on `samples` seeded samples per prompt from it and from its AR baseline),
    #: `repeats` (only its repeats are compared: proves determinism only, so its points are
    #: `unproven` at best, `nondeterministic` when repeats disagree; must be asked for by
    #: name). `auto`: coupled where the engine offers it (the catalog's expectation, checked
    #: against what each server advertises), else scored where the engine scores
    #: (`sweeper.proof.scored.catalog`), else distribution.
    sampled: Literal["auto"] | SampledCheck = "auto"
    #: A coupled divergence where the baseline's sample margin (probability mass between its
    #: uniform and the chosen token's CDF edge) is below this is a sampled near tie.
    sampled_near_tie_margin: Annotated[Number, Field(ge=0, le=0.5)] = 0.001
    #: A scored token outside a truncation (top-k, top-p, min-p) whose raw logprob lies less
    #: than this below the boundary's (the k-th token's, the nucleus's last, the min-p
    #: threshold), in nats, is a near tie (prefill and decode numerics), never a proof; a point
    #: with more such near ties per token than its AR server's own samples (95% upper bound) has
    #: them counted as violations (`sweeper.proof.scored.judge`). Unset: the scoring engine's own
    #: numerical margin (`sweeper.proof.scored.catalog`, recorded with each score).
    scored_near_tie_margin: Annotated[Number, Field(ge=0, le=5)] | None = None
    #: A scored pass proves something only if the test detects a sampler this much hotter or
    #: colder at every token (the log of the temperature factor: 0.2 is 1.22x) with 80% power
    #: on the point's own tokens; a weaker test's pass is `unproven`. (Under top-p or top-k a
    #: hotter sampler also draws impossible tokens: the stated power leaves them out.)
    scored_max_shift: Annotated[Number, Field(gt=0, le=2)] = 0.2
    #: Seeded samples per prompt drawn from each speculative config (and twice as many from
    #: its AR baseline: the test's and the AR-vs-AR control's) for `distribution`.
    samples: Annotated[Int, Field(ge=4, le=2000)] = 96
    #: Output tokens of each sample (default: the workload's max_tokens, at most 64: the test's
    #: power comes from the first positions, where samples still share a prefix).
    sample_tokens: Annotated[Int, Field(ge=1, le=4096)] | None = None
    #: Samples in flight at once while drawing them.
    sample_concurrency: Annotated[Int, Field(ge=1, le=1024)] = 8
    #: The distribution test's false-alarm rate per config (its p-value at or below: `shifted`).
    alpha: Annotated[Number, Field(gt=0, le=0.2)] = 0.01
    #: A pass proves something only if the test detects this shift (a share of tokens moved
    #: onto tokens AR never samples there: total variation per token) with 80% power on the
    #: run's own baseline samples; a weaker test's pass is `unproven`.
    max_shift: Annotated[Number, Field(gt=0, le=1)] = 0.1
    #: `scored`: the AR baseline draws `samples` per prompt once (its false-alarm control),
    #: and two servers scoring the same samples (the AR point's own, rescored by every other
    #: scorer of the run) must agree on each token's raw probability within this: else the
    #: scoring path is not the AR's, and the scored verdicts it gave are unproven.
    score_agreement: Annotated[Number, Field(gt=0, le=1)] = 0.01

    def sample_length(self, max_tokens: int) -> int:
        """Output tokens of each sample at a point asking `max_tokens`."""
        return self.sample_tokens if self.sample_tokens is not None else min(max_tokens, 64)


class RepeatsSpec(StrictModel):
    """Repetition across restarts: K restarts of every server config, so each point carries a
    mean and a confidence interval over restarts instead of one draw."""

    restarts: Annotated[Int, Field(ge=1, le=20)] = 1
    #: Measure the AR baseline again after every N speculative restarts and at the end of the
    #: run: a drift check (`sweeper.analysis.drift`), never a denominator. Speedups keep
    #: dividing by their round's own baseline; one that drifted past the limit is flagged.
    baseline_every: Annotated[Int, Field(ge=1)] | None = None


# --- the spec -----------------------------------------------------------------------------------


def _local_only() -> list[LocalHostSpec | SSHHostSpec | SlurmHostSpec]:
    return [LocalHostSpec()]


class Spec(StrictModel):
    """A whole sweep: where, what runtime, which grid, which workload, how to judge it."""

    name: Slug
    hosts: list[HostSpec] = Field(default_factory=lambda: _local_only(), min_length=1)
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    grid: GridSpec = Field(default_factory=GridSpec)
    #: Add the autoregressive server config (speculative none); it runs first on each host.
    baseline: StrictBool = True
    workload: WorkloadSpec
    determinism: DeterminismSpec = Field(default_factory=DeterminismSpec)
    #: Latency targets: each point's goodput, and each config's knee over the rates.
    slo: SloSpec | None = None
    #: Split the speculative server configs between (identical) hosts, every level of every
    #: server factor on every host where the counts allow.
    shard: StrictBool = False
    #: Labels the engine's rules make one behaviour (`EffectiveRules`): measured once and
    #: reported under each (`measure_once`), or refused by validate (`refuse`).
    same_behaviour: Literal["measure_once", "refuse"] = "measure_once"
    #: Leave the last server config running at the end instead of stopping it.
    leave_running: StrictBool = False
    #: Search the grid for the best config under the exactness constraint (`sweeper.search`).
    search: SearchSpec | None = None
    #: How often each server config is restarted and measured again (noise across restarts).
    repeats: RepeatsSpec = Field(default_factory=lambda: RepeatsSpec())
    #: Measure only these points (ids as `sweeper plan` prints them; a point's restarts come
    #: with it) and the AR points they are compared with: a reproducer (`sweeper bisect`).
    only: list[NonEmptyStr] = Field(default_factory=list)
    #: Published figures (speedup, tau per dataset and method) the run's tau is held against
    #: (`sweeper.spec.reference`): a built-in table's name, or `{file: PATH, tolerance: 0.2}`.
    reference: ReferenceSpec | None = None

    @field_validator("hosts", mode="before")
    @classmethod
    def _expand_host_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [host_shorthand(item, index) for index, item in enumerate(value)]
        return value

    @model_validator(mode="after")
    def _source_fits_the_hosts(self) -> Spec:
        """`runtime.source` is checked out on each host over its own connection; a Slurm
        node has none of its own (the work goes through the login host)."""
        if self.runtime.source is not None:
            for index, host in enumerate(self.hosts):
                if host.kind == "slurm":
                    message = (
                        "runtime.source runs a checkout on SSH or local hosts; on Slurm hosts "
                        "install the fork on the nodes instead"
                    )
                    raise problem(message, at=("hosts", index))
        return self

    @model_validator(mode="after")
    def _grid_fits_the_engine(self) -> Spec:
        """A grid axis the engine would ignore or override is refused: it would measure one
        server under several labels."""
        written = [
            k
            for k in (*SERVER_KEYS, *self.grid.extra_flags())
            if k in self.grid.model_fields_set or k in self.grid.extra_flags()
        ]
        engine = self.runtime.engine
        if not RECORDS[engine].launched:
            for index, host in enumerate(self.hosts):
                if host.kind != "local":
                    message = f"engine {engine!r} measures from this machine: hosts must be [local]"
                    raise problem(message, at=("hosts", index))
            for key in written:
                message = (
                    f"engine {engine!r} measures a running endpoint and starts nothing, so the "
                    f"server key {key!r} would change nothing; remove it from the grid"
                )
                raise problem(message, at=("grid", key))
            return self
        mapping = self.runtime.engine_mapping()
        assert mapping is not None  # RuntimeSpec guarantees one for every launched engine
        name = self.runtime.preset or ("the spec's mapping" if self.runtime.mapping else "")
        name = name or f"engine {self.runtime.engine!r}"
        found: list[tuple[str, tuple[str | int, ...]]] = []
        for key in SPECULATIVE_KEYS:
            if key in written and key not in mapping.params:
                reason = mapping.unused.get(key, "its mapping does not use it")
                message = f"{key} is not used by {name}: {reason}; remove it from the grid"
                found.append((message, ("grid", key)))
        if found:  # every unused axis at once: fixing one must not reveal the next
            raise problems("Spec", found)
        return self

    @model_validator(mode="after")
    def _fits_the_context(self) -> Spec:
        """With `runtime.max_model_len`, no length may exceed the model's context: a request's
        max_tokens, a tree's budget (plus its root) or a draft block."""
        limit = self.runtime.max_model_len
        if limit is None:
            return self
        found: list[tuple[str, tuple[str | int, ...]]] = []
        if self.workload.max_tokens > limit:
            message = f"{self.workload.max_tokens} exceeds runtime.max_model_len {limit}"
            found.append((message, ("workload", "max_tokens")))
        for key, extra in (("budget", 1), ("block_size", 0)):
            for index, value in enumerate(getattr(self.grid, key)):
                if value + extra > limit:
                    message = f"{key} {value} does not fit runtime.max_model_len {limit}"
                    found.append((message, ("grid", key, index)))
        if found:
            raise problems("Spec", found)
        return self

    @model_validator(mode="after")
    def _one_label_per_behaviour(self) -> Spec:
        """With `same_behaviour: refuse`, two grid labels the engine's rules make one server
        are refused at the grid key that tells them apart, with the rule."""
        if self.same_behaviour != "refuse" or not RECORDS[self.runtime.engine].launched:
            return self
        mapping = self.runtime.engine_mapping()
        rules = mapping.effective if mapping is not None else None
        if rules is None:
            return self
        keys = [k for k in mapping.params if k in SPECULATIVE_KEYS]  # type: ignore[union-attr]
        seen: dict[str, dict[str, Any]] = {}
        for values in itertools.product(*(self.grid.values(k) for k in keys)):
            params = dict(zip(keys, values, strict=True))
            key = repr(sorted(effective(rules, params).items()))
            first = seen.setdefault(key, params)
            if first is not params:
                differ = next(k for k in keys if first[k] != params[k])
                message = (
                    f"{differ} {first[differ]} and {params[differ]} are one behaviour at "
                    + ", ".join(f"{k} {v}" for k, v in params.items() if k != differ)
                    + f" ({why(rules, params)}; {rules.source}); remove one, or set "
                    "same_behaviour: measure_once"
                )
                raise problem(message, at=("grid", differ))
        return self

    @model_validator(mode="after")
    def _rules_name_measured_loads(self) -> Spec:
        """A rule naming `rate` needs open-loop points (`workload.load`)."""
        if self.workload.load is not None:
            return self
        for rule_kind in ("exclude", "include"):
            for index, rule in enumerate(getattr(self.grid, rule_kind)):
                if "rate" in rule:
                    message = "no open-loop points to match: rates come from workload.load"
                    raise problem(message, at=("grid", rule_kind, index, "rate"))
        return self

    @model_validator(mode="after")
    def _slurm_leaves_nothing_running(self) -> Spec:
        """A Slurm host's allocations are cancelled when the sweep ends: nothing can stay up."""
        if self.leave_running and any(isinstance(h, SlurmHostSpec) for h in self.hosts):
            message = (
                "a slurm host cancels its allocations when the sweep ends, so nothing can be "
                "left running; remove leave_running"
            )
            raise problem(message, at=("leave_running",))
        return self

    @model_validator(mode="after")
    def _one_slurm_host_per_login(self) -> Spec:
        """A run's jobs are found and cancelled by their name, `sweeper-<run id>`: two slurm
        hosts on one login host would cancel each other's allocations."""
        seen: dict[str, str] = {}
        for index, host in enumerate(self.hosts):
            if isinstance(host, SlurmHostSpec):
                if host.address in seen:
                    message = (
                        f"slurm hosts {seen[host.address]!r} and {host.name!r} share the login "
                        f"host {host.address!r}, so their jobs would share one name; use one "
                        "host with more allocations"
                    )
                    raise problem(message, at=("hosts", index, "address"))
                seen[host.address] = host.name
        return self

    @model_validator(mode="after")
    def _search_fits(self) -> Spec:
        """A search decides its next config from the last one's result: one host, one worker."""
        if self.search is None:
            return self
        if len(self.hosts) != 1 or isinstance(self.hosts[0], SlurmHostSpec):
            message = "a search runs on one local or ssh host (it picks each config from the last)"
            raise problem(message, at=("search",))
        if self.search.constraints.slo and self.slo is None:
            raise problem("constraints.slo needs the spec's slo", at=("search", "constraints"))
        if self.search.strategy == "halving" and self.repeats.restarts > 1:
            message = "halving decides the restarts itself; leave repeats.restarts at 1"
            raise problem(message, at=("repeats", "restarts"))
        return self

    @model_validator(mode="after")
    def _unique_hosts(self) -> Spec:
        seen: set[str] = set()
        for index, host in enumerate(self.hosts):
            if host.name in seen:
                raise problem(f"duplicate host name {host.name!r}", at=("hosts", index))
            seen.add(host.name)
        return self
