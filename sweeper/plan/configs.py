"""A plan's configs and points: a `ServerConfig` is one way of starting the engine (a
restart), a `RequestConfig` what each request of a point asks for (never a restart), a `Point`
one (host, server config, request config). Plain, frozen data with stable ids and labels (resume
and every record rely on them); `model.py` orders them into a plan.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from sweeper.results.rows import tree_label_parts
from sweeper.spec import SERVER_KEYS


def short_hash(data: Any, length: int = 10) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _fmt(value: Any) -> str:
    """Compact, readable rendering of a parameter value for ids: 0.0 -> 0, True -> 1."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        # "g" keeps 6 digits, so 0.1234561 and 0.1234562 would share an id (and one point
        # would silently replace the other); the shortest exact form when "g" loses digits.
        short = format(value, "g")
        return short if float(short) == value else repr(value)
    return str(value)


_ID_SAFE = re.compile(r"[^A-Za-z0-9.]+")


Mode = Literal["ar", "speculative"]
#: The param of the AR config started as the speed baseline (`runtime.speed_baseline`).
SPEED_BASELINE = "speed_baseline"


@dataclass(frozen=True)
class ServerConfig:
    """One way of starting the engine; each distinct one is a restart."""

    id: str
    mode: Mode
    #: Grid parameters: the speculative keys of the engine's mapping (speculative configs
    #: only), cuda_graph, extra runtime flags.
    params: Mapping[str, Any]
    #: Which of `params` only speculative decoding has (not part of the identity: the mapping
    #: decides it, and the same params under the same mapping mean the same server).
    speculative_keys: tuple[str, ...] = field(default=(), compare=False)
    restart: int = 0  # which restart of this server (`repeats.restarts`, halving): 0 first
    #: Labels of other configs the engine's rules make this same behaviour (measured once,
    #: reported under each: `sweeper.catalog.effective`).
    covers: tuple[str, ...] = field(default=(), compare=False)

    def __hash__(self) -> int:
        return hash(self.id)

    @classmethod
    def make(
        cls, mode: Mode, params: Mapping[str, Any], speculative_keys: tuple[str, ...] = ()
    ) -> ServerConfig:
        """A server config whose id is a short hash of its mode and params (stable across runs)."""
        params = dict(params)
        return cls(short_hash({"mode": mode, "params": params}), mode, params, speculative_keys)

    def again(self, restart: int) -> ServerConfig:
        """The same server started anew as restart `restart` (its id's hash names it; 0's not)."""
        data: dict[str, Any] = {"mode": self.mode, "params": dict(self.params), "restart": restart}
        data = data if restart else {k: v for k, v in data.items() if k != "restart"}
        return replace(self, id=short_hash(data), restart=restart)

    @property
    def extra_params(self) -> dict[str, Any]:
        """Parameters beyond the named server keys and the tree keys (extra runtime flags)."""
        skip = (*SERVER_KEYS, SPEED_BASELINE)
        return {k: v for k, v in self.params.items() if k not in skip}

    @property
    def label(self) -> str:
        """Readable id part: `b16-k4-bs8-cg1`, `ar-cg1`; extra flags appended with a hash."""
        if self.mode == "ar":
            parts = ["ar", "speed"] if self.params.get(SPEED_BASELINE) else ["ar"]
        else:
            parts = tree_label_parts(self.params) or ["spec"]
        if "cuda_graph" in self.params:
            parts.append(f"cg{_fmt(self.params['cuda_graph'])}")
        extra = self.extra_params
        if extra:
            # Readable but lossy (values are sanitised), so a hash of the exact values follows.
            parts += [_ID_SAFE.sub("", f"{k}{_fmt(v)}") for k, v in extra.items()]
            parts.append(short_hash(extra, 6))
        if self.restart:
            parts.append(f"rs{self.restart}")
        return "-".join(parts)

    @property
    def flags(self) -> dict[str, Any]:
        """The params that are not speculative: an AR baseline with these measures the same
        server without speculation."""
        return {k: v for k, v in self.params.items() if k not in self.speculative_keys}

    @property
    def baseline_key(self) -> str:
        """Hash of the non-speculative params and restart: configs with equal keys share one."""
        return short_hash({**self.flags, "restart": self.restart} if self.restart else self.flags)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "mode": self.mode, "params": dict(self.params)}
        out = {**out, "restart": self.restart} if self.restart else out
        return {**out, "covers": list(self.covers)} if self.covers else out


@dataclass(frozen=True)
class RequestConfig:
    """What each request of a point asks for, and the load it comes in; changing it never
    restarts the runtime. A point is closed-loop (`concurrency`) or open-loop (`rate`, with
    its arrival process and `max_concurrency`), never both."""

    id: str
    temperature: float
    max_tokens: int
    concurrency: int | None
    top_p: float | None = None
    seed: int | None = None
    rate: float | None = None
    arrival: str | None = None
    #: The gamma shape (gamma arrivals only).
    burstiness: float | None = None
    max_concurrency: int | None = None
    #: Sample from the k most likely tokens (None: the engine's default, no cut-off).
    top_k: int | None = None

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a point is closed-loop (concurrency) or open-loop (rate), not both")

    @classmethod
    def make(
        cls,
        temperature: float,
        max_tokens: int,
        concurrency: int | None,
        top_p: float | None = None,
        seed: int | None = None,
        *,
        rate: float | None = None,
        arrival: str = "poisson",
        burstiness: float = 1.0,
        max_concurrency: int | None = None,
        top_k: int | None = None,
    ) -> RequestConfig:
        """Readable, stable ids: `t0-c1` (closed loop); `t0-r2`, `t0-rinf`, `t0-r2-constant`,
        `t0-r2-gamma0.5`, `t0-r2-m8` (open loop: rate, arrival unless Poisson, max in flight);
        sampling cut-offs after the temperature: `t0.7-p0.9-tk40-c1`."""
        parts = [f"t{_fmt(float(temperature))}"]
        if top_p is not None:
            parts.append(f"p{_fmt(float(top_p))}")
        if top_k is not None:
            parts.append(f"tk{top_k}")
        if rate is None:
            parts.append(f"c{concurrency}")
            return cls(
                "-".join(parts),
                float(temperature),
                max_tokens,
                concurrency,
                top_p,
                seed,
                top_k=top_k,
            )
        parts.append(f"r{_fmt(float(rate))}")
        if arrival != "poisson":
            parts.append(arrival + (_fmt(float(burstiness)) if arrival == "gamma" else ""))
        if max_concurrency is not None:
            parts.append(f"m{max_concurrency}")
        return cls(
            "-".join(parts),
            float(temperature),
            max_tokens,
            None,
            top_p,
            seed,
            rate=float(rate),
            arrival=arrival,
            burstiness=float(burstiness) if arrival == "gamma" else None,
            max_concurrency=max_concurrency,
            top_k=top_k,
        )

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def comparison_key(self) -> tuple[Any, ...]:
        """What must be equal for two points to be compared (speedup, determinism)."""
        return (
            self.temperature,
            self.max_tokens,
            self.concurrency,
            self.top_p,
            self.rate,
            self.arrival,
            self.burstiness,
            self.max_concurrency,
            self.top_k,
        )

    @property
    def sampling_key(self) -> tuple[Any, ...]:
        """What decides the distribution a request samples from (its load does not): points
        with one key on one server share their samples (`determinism.samples`)."""
        return (self.temperature, self.top_p, self.top_k, self.max_tokens)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: an infinite rate is "inf", as in the spec (JSON has none)."""
        out = {"id": self.id, **{f.name: getattr(self, f.name) for f in fields(self)[1:]}}
        if self.top_k is None:  # added later: plans without one read as they always did
            del out["top_k"]
        if self.rate is not None and math.isinf(self.rate):
            out["rate"] = "inf"
        return out


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
    #: The sample roles it draws for its distribution test (`sweeper.plan.sampling`), and the
    #: point of the same server config whose samples it shares (same sampling, another load).
    samples: tuple[str, ...] = ()
    samples_from: str | None = None

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
            "speed_baseline_point_id": self.speed_baseline_point_id,
        } | (
            ({"length": self.length} if self.length != 1 else {})
            | ({"samples": list(self.samples)} if self.samples else {})
            | ({"samples_from": self.samples_from} if self.samples_from else {})
        )


def point_id(host: str, server_config: ServerConfig, request_config: RequestConfig) -> str:
    """`<host>-<server config label>-<request config id>`."""
    return f"{host}-{server_config.label}-{request_config.id}"
