"""Building the plan: a spec's grid expanded into server configs and request configs.

Server parameters (budget, topk, block_size, cuda_graph and any extra runtime flag) decide
restarts; request parameters (temperature, top_p, max_tokens, and the load: a concurrency or a rate
with its arrival process) never do. Every grid combination is measured at every load of the
workload, closed loops first; a rule naming `concurrency` or `rate` picks loads. Redundant grid
points are dropped with a note: topk > budget (a tree node cannot have more children than the tree
has nodes), any topk but 1 with budget 0, and budget 0 itself when the AR baseline already runs it
(budget 0 *is* autoregressive decoding). With `baseline: true` every group of speculative configs
that share their non-speculative flags (cuda_graph, extra flags) gets an AR server config with the
same flags, so a speedup compares speculation alone; AR configs run first on each host.
`repeats.restarts: K` repeats that order K times (restart 1..K-1 carry `-rs<k>` in their ids);
`repeats.baseline_every: N` measures the round's AR configs again after every N speculative
restarts and at the end (restarts K, K+1, ...: drift checks, no speculative config divides by them).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sweeper.catalog.effective import effective, why
from sweeper.catalog.records import RECORDS
from sweeper.config import SPEED_BASELINE, RequestConfig, ServerConfig, mode_of
from sweeper.config.features import SCALAR_FEATURES, used
from sweeper.plan.checks import guard_size, review, same_request
from sweeper.plan.features import check_features
from sweeper.plan.loads import in_loads
from sweeper.plan.model import HostPlan, Plan, Step, provision_of
from sweeper.plan.only import only_points
from sweeper.plan.sampling import SampledChecks, sampling_notes
from sweeper.spec import REQUEST_KEYS, SERVER_KEYS, GridSpec, Spec
from sweeper.spec.grid import LOAD_KEYS


def build_plan(spec: Spec) -> Plan:
    """Expand the grid, drop redundant points with notes, order and assign to hosts."""
    guard_size(spec)
    grid = spec.grid
    extra_keys = list(grid.extra_flags())
    shape = _Shape.of(spec)
    keys = [*SERVER_KEYS, *extra_keys, *REQUEST_KEYS]
    loads = spec.workload.loads()

    combos = [
        {**dict(zip(keys, vals, strict=True)), **load}
        for vals in itertools.product(*(grid.values(k) for k in keys))
        for load in loads
    ]
    combos = [c for c in combos if not any(_matches(grid, rule, c) for rule in grid.exclude)]
    for rule in grid.include:
        missing = [k for k in keys if k not in rule]
        fixed = [grid.rule_values(k, v) for k, v in rule.items() if k not in LOAD_KEYS]
        named = [k for k in rule if k not in LOAD_KEYS]
        for vals in itertools.product(*fixed, *(grid.values(k) for k in missing)):
            combo = dict(zip([*named, *missing], vals, strict=True))
            for load in _rule_loads(grid, rule, loads):
                combos.append({**{k: combo[k] for k in keys}, **load})

    drops: Counter[str] = Counter()
    # Ordered maps keep the spec's order: first appearance decides a config's place.
    by_server: dict[str, tuple[ServerConfig, dict[str, RequestConfig]]] = {}
    for combo in combos:
        reason = _redundancy(combo, spec.baseline, shape)
        if reason:
            drops[reason] += 1
            continue
        server = shape.server_config(combo, extra_keys)
        request = _request_config(combo, spec)
        entry = by_server.setdefault(server.id, (server, {}))
        if request.id in entry[1]:
            same_request(entry[1][request.id], request)
            drops[_duplicate_reason(combo, server)] += 1
            continue
        entry[1][request.id] = request

    ar_configs = [entry for entry in by_server.values() if entry[0].mode == "ar"]
    spec_configs = [entry for entry in by_server.values() if entry[0].mode == "speculative"]
    notes = [f"dropped {n} point{'s' if n != 1 else ''}: {reason}" for reason, n in drops.items()]
    notes += _feature_notes(spec)
    spec_configs = _one_per_behaviour(spec, spec_configs, notes)
    if spec.baseline and shape.has_baseline:
        ar_configs = _baseline_configs(spec, spec_configs, extra_keys, shape)
        if spec.runtime.speed_baseline:
            # Each exactness baseline's twin with the production flags: the speed baseline.
            ar_configs += [
                (ServerConfig.make("ar", {**sc.params, SPEED_BASELINE: True}), dict(rcs))
                for sc, rcs in ar_configs
            ]
            notes.append(
                "speed baseline: each AR baseline also runs with "
                + ", ".join(f"{k}={v}" for k, v in spec.runtime.speed_baseline.items())
                + " (speed_speedup); exactness is judged against the AR baseline with the "
                "speculative configs' own flags (speedup)"
            )

    configs = [*ar_configs, *spec_configs]
    notes += check_features(spec.runtime.engine, [(sc, rcs.values()) for sc, rcs in configs])
    sampled_checks = SampledChecks.of(spec)
    host_plans = [
        HostPlan(
            hp.host,
            _restarted(hp.steps, spec.repeats.restarts, spec.repeats.baseline_every),
            sampled_checks,
        )
        for hp in _assign_hosts(spec, ar_configs, spec_configs, notes)
    ]
    if spec.only:
        host_plans = list(only_points(host_plans, spec.only))
        notes.append(f"only: {len(spec.only)} named point(s) and the AR points they compare with")
    if sampled_checks.ar_scores_speculative and spec.search is None:
        host_plans = [with_scoring_step(hp) for hp in host_plans]
    host_plans = [replace(hp, steps=in_loads(spec, hp.steps)) for hp in host_plans]
    checks = sum(
        s.server_config.restart >= spec.repeats.restarts and not s.scoring
        for h in host_plans
        for s in h.steps
    )
    if checks:
        notes.append(
            f"baseline checks: the AR baseline measured again after every "
            f"{spec.repeats.baseline_every} speculative restart(s) and at the end ({checks} more "
            "restart(s)); they show its drift, speedups still divide by each round's own baseline"
        )
    plan = Plan(spec, tuple(host_plans), tuple(notes))
    points = list(plan.points())
    sampled = [
        p for p in points if p.request_config.temperature > 0 and p.server_config.mode != "ar"
    ]
    drawing = sum(bool(p.samples) for p in sampled)
    provisions = [provision_of(p, spec) for p in sampled]
    notes += sampling_notes(spec, sampled_checks, provisions, drawing, plan.n_samples)
    return Plan(spec, plan.hosts, (*notes, *review(plan, len(spec_configs))))


def _feature_notes(spec: Spec) -> list[str]:
    """What each digest in the request config ids stands for: the workload's structured
    features whose id part is a hash (`lb1a2b3c`), with their values as the records hold them."""
    said = [
        f"{feature.spoken(value)} = {feature.column_value(value)}"
        for feature, value in used(spec.workload.features())
        if feature.hashed
    ]
    return ["request features: " + "; ".join(said)] if said else []


def with_scoring_step(host: HostPlan) -> HostPlan:
    """The host with one more start of its first AR baseline after everything else, to score
    its sampled speculative points' samples (`sweeper.plan.sampling`); unchanged where it has
    none, or no AR baseline to start (its points then stay unproven, as the plan notes)."""
    steps = list(host.steps)
    sampled = any(
        sc.mode != "ar" and any(rc.temperature > 0 for rc in rcs) for sc, rcs, *_ in steps
    )
    ar = [s.server_config for s in steps if s.server_config.mode == "ar"]
    ar = [sc for sc in ar if SPEED_BASELINE not in sc.params] or ar
    if not sampled or not ar:
        return host
    first = ar[0]
    restart = 1 + max(
        s.server_config.restart for s in steps if s.server_config.flags == first.flags
    )
    scorer = Step(first.again(restart), (), scoring=True)
    return replace(host, steps=(*steps, scorer))


def _one_per_behaviour(
    spec: Spec,
    configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    notes: list[str],
) -> list[tuple[ServerConfig, dict[str, RequestConfig]]]:
    """Speculative configs the engine's rules make one behaviour (`effective`) run once: the
    first label measures, covering the others' request configs, with a note per label."""
    mapping = spec.runtime.engine_mapping() if RECORDS[spec.runtime.engine].launched else None
    rules = mapping.effective if mapping is not None else None
    if rules is None:
        return configs
    kept: dict[str, tuple[ServerConfig, dict[str, RequestConfig]]] = {}
    for server, requests in configs:
        key = json.dumps(effective(rules, server.params), sort_keys=True, default=str)
        if key not in kept:
            kept[key] = (server, dict(requests))
            continue
        first, theirs = kept[key]
        theirs.update(requests)
        kept[key] = (replace(first, covers=(*first.covers, server.label)), theirs)
        notes.append(
            f"{server.label} is {first.label} ({why(rules, server.params)}): measured once, "
            "reported under both labels"
        )
    return list(kept.values())


def _matches(grid: GridSpec, rule: Mapping[str, Any], combo: Mapping[str, Any]) -> bool:
    """A rule matches when every key's value equals the combo's (or is among a list's values)."""
    for key, wanted in rule.items():
        options = grid.rule_values(key, wanted)
        if not any(_same(combo.get(key), option) for option in options):
            return False
    return True


def _rule_loads(
    grid: GridSpec, rule: Mapping[str, Any], loads: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The loads an include rule adds: those it names (a concurrency or a rate, even one the
    workload does not list), else every load of the workload."""
    for key in LOAD_KEYS:
        if key in rule:
            other = next(k for k in LOAD_KEYS if k != key)
            return [{key: value, other: None} for value in grid.rule_values(key, rule[key])]
    return loads


def _same(a: Any, b: Any) -> bool:
    # 0 == False in Python; a bool flag must not match a number.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


@dataclass(frozen=True)
class _Shape:
    """What a server config is made of under the spec's engine: its speculative keys (from the
    engine's mapping), whether it has a cuda-graph knob, and whether an AR baseline can run."""

    speculative_keys: tuple[str, ...]
    cuda_graph: bool
    has_baseline: bool

    @classmethod
    def of(cls, spec: Spec) -> _Shape:
        runtime = spec.runtime
        if not RECORDS[runtime.engine].launched:  # an endpoint: nothing to set, maybe a baseline
            return cls((), False, runtime.baseline_url is not None)
        mapping = runtime.engine_mapping()
        return cls(tuple(mapping.params) if mapping else (), True, True)

    def uses(self, key: str) -> bool:
        return key in self.speculative_keys

    def flags(self, combo: Mapping[str, Any], extra_keys: list[str]) -> dict[str, Any]:
        """The combo's non-speculative server params: cuda_graph (where the engine has one)
        and the extra runtime flags the mapping does not place."""
        flags = {k: combo[k] for k in extra_keys if not self.uses(k)}
        return {"cuda_graph": combo["cuda_graph"], **flags} if self.cuda_graph else flags

    def server_config(self, combo: Mapping[str, Any], extra_keys: list[str]) -> ServerConfig:
        return ServerConfig.of(self.flags(combo, extra_keys), self.speculative(combo))

    def speculative(self, combo: Mapping[str, Any]) -> dict[str, Any]:
        """The combo's values for the speculative keys the engine's mapping uses and the grid
        names (a mapping's optional knob, SGLang's accept thresholds, is left to the engine's
        default where the grid has no axis for it)."""
        return {k: combo[k] for k in self.speculative_keys if k in combo}


def _redundancy(combo: Mapping[str, Any], baseline: bool, shape: _Shape) -> str | None:
    """Why a grid point would measure nothing new, or None."""
    if not (shape.uses("budget") and shape.uses("topk")):
        return None
    budget, topk = combo["budget"], combo["topk"]
    ar = mode_of(shape.speculative(combo)) == "ar"
    if ar and topk != 1:
        return "topk has no meaning with budget 0 (autoregressive)"
    if ar and baseline:
        return "budget 0 is autoregressive decoding, which the AR baseline already measures"
    if topk > budget > 0:
        return (
            f"topk {topk} > budget {budget} (a node cannot have more children than the tree nodes)"
        )
    return None


#: Request keys greedy decoding ignores (the top token survives every cut-off): points differing
#: only in them at temperature 0 are one. Penalties and the structured features do change greedy
#: output.
_SAMPLED_ONLY = ("top_p", "top_k", "min_p")


def _duplicate_reason(combo: Mapping[str, Any], server: ServerConfig) -> str:
    if server.mode == "ar":
        return "block_size has no meaning with budget 0 (autoregressive)"
    for key in _SAMPLED_ONLY:
        if combo["temperature"] == 0 and combo.get(key) is not None:
            return f"{key} has no effect at temperature 0 (greedy)"
    return "listed twice by include rules"


def _request_config(combo: Mapping[str, Any], spec: Spec) -> RequestConfig:
    temperature = float(combo["temperature"])
    sampled = {k: combo.get(k) if temperature > 0 else None for k in _SAMPLED_ONLY}
    top_p, top_k = sampled["top_p"], sampled["top_k"]
    features = {
        **{k: combo.get(k) for k in SCALAR_FEATURES},
        "min_p": sampled["min_p"],
        **spec.workload.features(),
    }
    load = spec.workload.load
    if combo.get("rate") is None or load is None:
        open_loop: dict[str, Any] = {}
    else:
        open_loop = {
            "rate": combo["rate"],
            "arrival": load.arrival,
            "burstiness": load.burstiness,
            "max_concurrency": load.max_concurrency,
        }
    return RequestConfig.make(
        temperature,
        spec.workload.max_tokens,
        combo.get("concurrency"),
        top_p,
        spec.workload.seed,
        **open_loop,
        top_k=top_k,
        features=features,
    )


def _baseline_configs(
    spec: Spec,
    spec_configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    extra_keys: list[str],
    shape: _Shape,
) -> list[tuple[ServerConfig, dict[str, RequestConfig]]]:
    """One AR config per group of speculative configs sharing their non-speculative flags,
    measuring every request config any of them uses (greedy and sampled alike)."""
    baselines: dict[str, tuple[ServerConfig, dict[str, RequestConfig]]] = {}
    for server, requests in spec_configs:
        ar = ServerConfig.make("ar", server.flags)
        entry = baselines.setdefault(ar.id, (ar, {}))
        entry[1].update(requests)
    if not baselines:  # nothing speculative left: an AR-only sweep of the grid's first flags
        first = {k: spec.grid.values(k)[0] for k in ("cuda_graph", *extra_keys)}
        ar = ServerConfig.make("ar", shape.flags(first, extra_keys))
        requests = {}
        for *values, load in itertools.product(
            *(spec.grid.values(k) for k in REQUEST_KEYS), spec.workload.loads()
        ):
            rc = _request_config({**dict(zip(REQUEST_KEYS, values, strict=True)), **load}, spec)
            requests[rc.id] = rc
        baselines[ar.id] = (ar, requests)
    return list(baselines.values())


def _assign_hosts(
    spec: Spec,
    ar_configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    spec_configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    notes: list[str],
) -> list[HostPlan]:
    """AR configs run first on every host; speculative configs on every host, or, with
    `shard: true`, dealt so every level of every server factor runs on every host where there
    are as many configs at that level as hosts (a host never stands for a factor's level)."""
    ar_steps = [Step(sc, tuple(rcs.values())) for sc, rcs in ar_configs]
    spec_steps = [Step(sc, tuple(rcs.values())) for sc, rcs in spec_configs]
    if spec.shard and len(spec.hosts) < 2:
        notes.append("shard has no effect with a single host")
    if not (spec.shard and len(spec.hosts) > 1):
        return [HostPlan(host, tuple(ar_steps + spec_steps)) for host in spec.hosts]
    dealt = _deal([step.server_config for step in spec_steps], len(spec.hosts))
    plans = []
    for index, host in enumerate(spec.hosts):
        mine = [step for step, to in zip(spec_steps, dealt, strict=True) if to == index]
        plans.append(HostPlan(host, tuple(ar_steps + mine)))
    notes.append(
        f"sharded {len(spec_steps)} speculative server configs over {len(spec.hosts)} hosts so "
        "each factor's levels run on every host; each host's AR baseline judges its own points"
    )
    names = [host.name for host in spec.hosts]
    for key, level, hosts in _levels_by_host(plans):
        missing = [name for name in names if name not in hosts]
        if missing:
            notes.append(
                f"shard: {key}={level!r} runs on {', '.join(sorted(hosts))} only "
                f"(fewer configs at that level than hosts): not on {', '.join(missing)}"
            )
    return plans


def _deal(configs: list[ServerConfig], n_hosts: int) -> list[int]:
    """A host index per config: each goes to the host holding the fewest configs that share
    its levels (summed over factors), then the fewest configs, then the first."""
    held: list[Counter[tuple[str, str]]] = [Counter() for _ in range(n_hosts)]
    sizes = [0] * n_hosts
    dealt = []
    for sc in configs:
        levels = [(k, json.dumps(v, default=str)) for k, v in sc.params.items()]
        to = min(range(n_hosts), key=lambda h: (sum(held[h][lv] for lv in levels), sizes[h], h))
        held[to].update(levels)
        sizes[to] += 1
        dealt.append(to)
    return dealt


def _levels_by_host(plans: list[HostPlan]) -> list[tuple[str, Any, set[str]]]:
    """(factor, level, hosts running it) over the speculative configs of every host, for each
    factor with more than one level."""
    where: dict[str, dict[str, tuple[Any, set[str]]]] = {}
    for plan in plans:
        for step in plan.steps:
            if step.server_config.mode != "speculative":
                continue
            for key, value in step.server_config.params.items():
                entry = where.setdefault(key, {}).setdefault(
                    json.dumps(value, default=str), (value, set())
                )
                entry[1].add(plan.name)
    return [
        (key, value, hosts)
        for key, levels in where.items()
        if len(levels) > 1
        for value, hosts in levels.values()
    ]


def _restarted(
    steps: tuple[Step, ...], restarts: int, baseline_every: int | None = None
) -> tuple[Step, ...]:
    """`repeats.restarts` rounds of every step, round by round: each round starts with the AR
    baseline again, so a drifting machine shows in the baseline and every speculative restart
    compares with the baseline measured just before it. With `baseline_every` the round's AR
    steps also run again after every that many speculative steps and after the run's last one
    (never just before the next round's own AR steps), as restarts `restarts`, `restarts` + 1...:
    a drift check between configs even with one restart."""
    out: list[Step] = []
    checks = 0
    for k in range(restarts):
        round_steps = [
            Step(step.server_config.again(k) if k else step.server_config, step.request_configs)
            for step in steps
        ]
        ar = [s for s in round_steps if s.server_config.mode == "ar"]
        speculative = [s for s in round_steps if s.server_config.mode != "ar"]
        out += ar
        for n, step in enumerate(speculative, 1):
            out.append(step)
            last = n == len(speculative)
            due = baseline_every is not None and (n % baseline_every == 0 or last)
            if ar and due and not (last and k + 1 < restarts):
                out += [
                    Step(s.server_config.again(restarts + checks), s.request_configs) for s in ar
                ]
                checks += 1
    return tuple(out)
