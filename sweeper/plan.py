"""The plan: a spec's grid expanded into server configs (restarts) and request configs (no restart).

Server parameters (budget, topk, block_size, cuda_graph and any extra runtime flag) decide
restarts; request parameters (temperature, top_p, concurrency, max_tokens) never do. Redundant grid
points are dropped with a note: topk > budget (a tree node cannot have more children than the tree
has nodes), any topk but 1 with budget 0, and budget 0 itself when the AR baseline already runs it
(budget 0 *is* autoregressive decoding). With `baseline: true` every group of speculative configs
that share their non-speculative flags (cuda_graph, extra flags) gets an AR server config with the
same flags, so a speedup compares speculation alone; AR configs run first on each host.

Everything here is plain data; `sweeper.runtime_argv` (re-exported here) turns a server config
into argv elements, never a shell string.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from sweeper.runtime_argv import runtime_flags, serve_argv
from sweeper.spec import REQUEST_KEYS, SERVER_KEYS, HostSpec, Spec

# Re-exported: the plan's users build a server config's command line from here.
__all__ = [
    "HostPlan",
    "Plan",
    "Point",
    "RequestConfig",
    "ServerConfig",
    "Step",
    "build_plan",
    "estimate_seconds",
    "point_id",
    "runtime_flags",
    "serve_argv",
]

#: Parameters that only mean something to speculative decoding; an AR config has none of them.
SPECULATIVE_KEYS = ("budget", "topk", "block_size")
#: Rough figures for `estimate_seconds` when nothing better is known (CPU, smollm2-135m).
DEFAULT_LOAD_S = 10.0
DEFAULT_TOK_S = 12.0


def _short_hash(data: Any, length: int = 10) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _fmt(value: Any) -> str:
    """Compact, readable rendering of a parameter value for ids: 0.0 -> 0, True -> 1."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


_ID_SAFE = re.compile(r"[^A-Za-z0-9.]+")


@dataclass(frozen=True)
class ServerConfig:
    """One way of starting the runtime; each distinct one is a restart."""

    id: str
    engine_mode: Literal["ar", "ddtree"]
    #: Grid parameters: budget/topk/block_size (ddtree only), cuda_graph, extra runtime flags.
    params: Mapping[str, Any]

    def __hash__(self) -> int:
        return hash(self.id)

    @classmethod
    def make(cls, engine_mode: Literal["ar", "ddtree"], params: Mapping[str, Any]) -> ServerConfig:
        """A server config whose id is a short hash of its mode and params (stable across runs)."""
        params = dict(params)
        return cls(_short_hash({"engine_mode": engine_mode, "params": params}), engine_mode, params)

    @property
    def extra_params(self) -> dict[str, Any]:
        """Parameters beyond the named server keys (extra runtime flags)."""
        return {k: v for k, v in self.params.items() if k not in SERVER_KEYS}

    @property
    def label(self) -> str:
        """Readable id part: `b16-k4-bs8-cg1`, `ar-cg1`; extra flags appended with a hash."""
        if self.engine_mode == "ar":
            parts = ["ar"]
        else:
            parts = [
                f"b{_fmt(self.params['budget'])}",
                f"k{_fmt(self.params['topk'])}",
                f"bs{_fmt(self.params['block_size'])}",
            ]
        parts.append(f"cg{_fmt(self.params['cuda_graph'])}")
        extra = self.extra_params
        if extra:
            # Readable but lossy (values are sanitised), so a hash of the exact values follows.
            parts += [_ID_SAFE.sub("", f"{k}{_fmt(v)}") for k, v in extra.items()]
            parts.append(_short_hash(extra, 6))
        return "-".join(parts)

    @property
    def baseline_key(self) -> str:
        """Hash of the non-speculative params: configs with equal keys share an AR baseline."""
        return _short_hash({k: v for k, v in self.params.items() if k not in SPECULATIVE_KEYS})

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "engine_mode": self.engine_mode, "params": dict(self.params)}


@dataclass(frozen=True)
class RequestConfig:
    """What each request of a point asks for; changing it never restarts the runtime."""

    id: str
    temperature: float
    max_tokens: int
    concurrency: int
    top_p: float | None = None
    seed: int | None = None

    @classmethod
    def make(
        cls,
        temperature: float,
        max_tokens: int,
        concurrency: int,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> RequestConfig:
        parts = [f"t{_fmt(float(temperature))}"]
        if top_p is not None:
            parts.append(f"p{_fmt(float(top_p))}")
        parts.append(f"c{concurrency}")
        return cls("-".join(parts), float(temperature), max_tokens, concurrency, top_p, seed)

    @property
    def comparison_key(self) -> tuple[float, int, int, float | None]:
        """What must be equal for two points to be compared (speedup, determinism)."""
        return (self.temperature, self.max_tokens, self.concurrency, self.top_p)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "concurrency": self.concurrency,
            "top_p": self.top_p,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Point:
    """One measurement: a request config against a server config on a host."""

    host: str
    server_config: ServerConfig
    request_config: RequestConfig
    #: The AR point this one is compared with (same host, flags, request config); None for AR.
    baseline_point_id: str | None = None

    @property
    def point_id(self) -> str:
        """Stable and readable, e.g. `local-b16-k4-bs8-cg1-t0-c1`; resume relies on it."""
        return point_id(self.host, self.server_config, self.request_config)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point_id": self.point_id,
            "host": self.host,
            "server_config": self.server_config.to_dict(),
            "request_config": self.request_config.to_dict(),
            "baseline_point_id": self.baseline_point_id,
        }


def point_id(host: str, server_config: ServerConfig, request_config: RequestConfig) -> str:
    """`<host>-<server config label>-<request config id>`."""
    return f"{host}-{server_config.label}-{request_config.id}"


class Step(NamedTuple):
    """One restart on a host: a server config and the request configs measured against it."""

    server_config: ServerConfig
    request_configs: tuple[RequestConfig, ...]


@dataclass(frozen=True)
class HostPlan:
    """Everything one host runs, in order (AR configs first)."""

    host: HostSpec
    steps: tuple[Step, ...]

    @property
    def name(self) -> str:
        return self.host.name

    def points(self) -> Iterator[Point]:
        baselines = {
            (step.server_config.baseline_key, rc.comparison_key): point_id(
                self.name, step.server_config, rc
            )
            for step in self.steps
            if step.server_config.engine_mode == "ar"
            for rc in step.request_configs
        }
        for step in self.steps:
            sc = step.server_config
            for rc in step.request_configs:
                baseline = None
                if sc.engine_mode != "ar":
                    baseline = baselines.get((sc.baseline_key, rc.comparison_key))
                yield Point(self.name, sc, rc, baseline)


@dataclass(frozen=True)
class Plan:
    """A spec expanded: per host the ordered restarts, plus notes on what was dropped and why."""

    spec: Spec
    hosts: tuple[HostPlan, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def restarts(self) -> int:
        """Distinct server configs per host, summed over hosts."""
        return sum(len(host.steps) for host in self.hosts)

    @property
    def n_points(self) -> int:
        return sum(len(step.request_configs) for host in self.hosts for step in host.steps)

    def points(self) -> Iterator[Point]:
        for host in self.hosts:
            yield from host.points()

    @property
    def n_requests(self) -> int:
        """Measured requests (warmup excluded): every prompt x repeats at every point."""
        workload = self.spec.workload
        return self.n_points * len(workload.prompts) * workload.repeats

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
                        }
                        for step in host.steps
                    ],
                    "points": [p.to_dict() for p in host.points()],
                }
                for host in self.hosts
            ],
        }


def estimate_seconds(
    plan: Plan, *, load_s: float = DEFAULT_LOAD_S, tok_s: float = DEFAULT_TOK_S
) -> float:
    """An estimate, not a promise: hosts run in parallel, so the slowest host's sum of
    restarts x `load_s` plus, per point, warmup and rounds of `concurrency` requests each taking
    max_tokens / `tok_s` (no speedup assumed, batching assumed free)."""
    workload = plan.spec.workload
    per_request = workload.max_tokens / tok_s
    n_requests = len(workload.prompts) * workload.repeats
    slowest = 0.0
    for host in plan.hosts:
        total = 0.0
        for step in host.steps:
            total += load_s + workload.warmup * per_request
            for rc in step.request_configs:
                total += math.ceil(n_requests / rc.concurrency) * per_request
        slowest = max(slowest, total)
    return slowest


# --- building ------------------------------------------------------------------------------------


def build_plan(spec: Spec) -> Plan:
    """Expand the grid, drop redundant points with notes, order and assign to hosts."""
    grid = spec.grid
    extra_keys = list(grid.extra_flags())
    keys = [*SERVER_KEYS, *extra_keys, *REQUEST_KEYS, "concurrency"]

    def values(key: str) -> list[Any]:
        return list(spec.workload.concurrency) if key == "concurrency" else grid.values(key)

    combos = [
        dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(values(k) for k in keys))
    ]
    combos = [c for c in combos if not any(_matches(rule, c) for rule in grid.exclude)]
    for rule in grid.include:
        missing = [k for k in keys if k not in rule]
        fixed = [v if isinstance(v, list) else [v] for v in rule.values()]
        for vals in itertools.product(*fixed, *(values(k) for k in missing)):
            combo = dict(zip([*rule, *missing], vals, strict=True))
            combos.append({k: combo[k] for k in keys})

    drops: Counter[str] = Counter()
    # Ordered maps keep the spec's order: first appearance decides a config's place.
    by_server: dict[str, tuple[ServerConfig, dict[str, RequestConfig]]] = {}
    for combo in combos:
        reason = _redundancy(combo, spec.baseline)
        if reason:
            drops[reason] += 1
            continue
        server = _server_config(combo, extra_keys)
        request = _request_config(combo, spec)
        entry = by_server.setdefault(server.id, (server, {}))
        if request.id in entry[1]:
            drops[_duplicate_reason(combo)] += 1
            continue
        entry[1][request.id] = request

    ar_configs = [entry for entry in by_server.values() if entry[0].engine_mode == "ar"]
    spec_configs = [entry for entry in by_server.values() if entry[0].engine_mode == "ddtree"]
    if spec.baseline:
        ar_configs = _baseline_configs(spec, spec_configs, extra_keys)

    notes = [f"dropped {n} point{'s' if n != 1 else ''}: {reason}" for reason, n in drops.items()]
    host_plans = _assign_hosts(spec, ar_configs, spec_configs, notes)
    return Plan(spec, tuple(host_plans), tuple(notes))


def _matches(rule: Mapping[str, Any], combo: Mapping[str, Any]) -> bool:
    """A rule matches when every key's value equals the combo's (or is among a list's values)."""
    for key, wanted in rule.items():
        options = wanted if isinstance(wanted, list) else [wanted]
        if not any(_same(combo.get(key), option) for option in options):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    # 0 == False in Python; a bool flag must not match a number.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _redundancy(combo: Mapping[str, Any], baseline: bool) -> str | None:
    """Why a grid point would measure nothing new, or None."""
    budget, topk = combo["budget"], combo["topk"]
    if budget == 0 and topk != 1:
        return "topk has no meaning with budget 0 (autoregressive)"
    if budget == 0 and baseline:
        return "budget 0 is autoregressive decoding, which the AR baseline already measures"
    if topk > budget > 0:
        return (
            f"topk {topk} > budget {budget} (a node cannot have more children than the tree nodes)"
        )
    return None


def _duplicate_reason(combo: Mapping[str, Any]) -> str:
    if combo["budget"] == 0:
        return "block_size has no meaning with budget 0 (autoregressive)"
    if combo["temperature"] == 0 and combo.get("top_p") is not None:
        return "top_p has no effect at temperature 0 (greedy)"
    return "listed twice by include rules"


def _server_config(combo: Mapping[str, Any], extra_keys: list[str]) -> ServerConfig:
    flags = {"cuda_graph": combo["cuda_graph"], **{k: combo[k] for k in extra_keys}}
    if combo["budget"] == 0:
        return ServerConfig.make("ar", flags)
    speculative = {k: combo[k] for k in SPECULATIVE_KEYS}
    return ServerConfig.make("ddtree", {**speculative, **flags})


def _request_config(combo: Mapping[str, Any], spec: Spec) -> RequestConfig:
    temperature = float(combo["temperature"])
    # Greedy decoding ignores top_p, so points differing only in top_p at temperature 0 are one.
    top_p = combo.get("top_p") if temperature > 0 else None
    return RequestConfig.make(
        temperature,
        spec.workload.max_tokens,
        combo["concurrency"],
        top_p,
        spec.workload.seed,
    )


def _baseline_configs(
    spec: Spec,
    spec_configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    extra_keys: list[str],
) -> list[tuple[ServerConfig, dict[str, RequestConfig]]]:
    """One AR config per group of speculative configs sharing their non-speculative flags,
    measuring every request config any of them uses (greedy and sampled alike)."""
    baselines: dict[str, tuple[ServerConfig, dict[str, RequestConfig]]] = {}
    for server, requests in spec_configs:
        flags = {k: v for k, v in server.params.items() if k not in SPECULATIVE_KEYS}
        ar = ServerConfig.make("ar", flags)
        entry = baselines.setdefault(ar.id, (ar, {}))
        entry[1].update(requests)
    if not baselines:  # nothing speculative left: an AR-only sweep of the grid's first flags
        flags = {
            "cuda_graph": spec.grid.cuda_graph[0],
            **{k: spec.grid.values(k)[0] for k in extra_keys},
        }
        ar = ServerConfig.make("ar", flags)
        requests = {}
        for temperature, top_p, concurrency in itertools.product(
            spec.grid.temperature, spec.grid.values("top_p"), spec.workload.concurrency
        ):
            rc = _request_config(
                {"temperature": temperature, "top_p": top_p, "concurrency": concurrency}, spec
            )
            requests[rc.id] = rc
        baselines[ar.id] = (ar, requests)
    return list(baselines.values())


def _assign_hosts(
    spec: Spec,
    ar_configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    spec_configs: list[tuple[ServerConfig, dict[str, RequestConfig]]],
    notes: list[str],
) -> list[HostPlan]:
    """AR configs run first on every host; speculative configs on every host, or round-robin
    between hosts with `shard: true`."""
    ar_steps = [Step(sc, tuple(rcs.values())) for sc, rcs in ar_configs]
    spec_steps = [Step(sc, tuple(rcs.values())) for sc, rcs in spec_configs]
    if spec.shard and len(spec.hosts) < 2:
        notes.append("shard has no effect with a single host")
    plans = []
    for index, host in enumerate(spec.hosts):
        mine = spec_steps[index :: len(spec.hosts)] if spec.shard else spec_steps
        plans.append(HostPlan(host, tuple(ar_steps + mine)))
    if spec.shard and len(spec.hosts) > 1:
        notes.append(
            f"sharded {len(spec_steps)} speculative server configs round-robin over "
            f"{len(spec.hosts)} hosts; the AR baseline runs on every host"
        )
    return plans
