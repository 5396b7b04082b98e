"""A request config: what each request of a point asks for, and the load it comes in (never a
restart); its stable id, how it reads from record columns, and what a missing value means."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from sweeper.config.columns import is_missing
from sweeper.config.features import (
    BY_NAME,
    FEATURES,
    SCALAR_FEATURES,
    RequestFeatures,
    from_columns,
)
from sweeper.config.ids import fmt

#: Keys of the grid that change what a request asks for (the scalar features among them);
#: never a restart.
REQUEST_KEYS: tuple[str, ...] = ("temperature", "top_p", "top_k", *SCALAR_FEATURES)

#: A row or request that names no temperature is greedy.
DEFAULT_TEMPERATURE = 0.0


def temperature_of(row: Mapping[str, Any]) -> float:
    """A row's temperature; a missing one (None, NaN, absent) is `DEFAULT_TEMPERATURE`."""
    value: Any = row.get("temperature")
    return DEFAULT_TEMPERATURE if is_missing(value) else float(value)


@dataclass(frozen=True)
class RequestConfig(RequestFeatures):
    """What each request of a point asks for (the request features, frozen, among it), and the
    load it comes in; changing it never restarts the runtime. A point is closed-loop
    (`concurrency`) or open-loop (`rate`, with its arrival process and `max_concurrency`),
    never both."""

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
        features: Mapping[str, Any] | None = None,
    ) -> RequestConfig:
        """Readable, stable ids: `t0-c1` (closed loop); `t0-r2`, `t0-rinf`, `t0-r2-constant`,
        `t0-r2-gamma0.5`, `t0-r2-m8` (open loop: rate, arrival unless Poisson, max in flight);
        sampling cut-offs after the temperature: `t0.7-p0.9-tk40-c1`; then the request
        `features` used (name -> plain or frozen value), in `FEATURES`' order:
        `t0.7-mp0.1-rp1.3-lb1a2b3c-n4-lp5-c1`."""
        parts = [f"t{fmt(float(temperature))}"]
        if top_p is not None:
            parts.append(f"p{fmt(float(top_p))}")
        if top_k is not None:
            parts.append(f"tk{top_k}")
        given = dict(features or {})
        unknown = set(given) - {f.name for f in FEATURES}
        if unknown:
            raise ValueError(f"not a request feature: {', '.join(sorted(unknown))}")
        frozen = {f.name: f.freeze(given.get(f.name)) for f in FEATURES}
        parts += [f.id_part(frozen[f.name]) for f in FEATURES if frozen[f.name] is not None]
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
                **frozen,
            )
        parts.append(f"r{fmt(float(rate))}")
        if arrival != "poisson":
            parts.append(arrival + (fmt(float(burstiness)) if arrival == "gamma" else ""))
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
            **frozen,
        )

    @classmethod
    def from_columns(cls, row: Mapping[str, Any]) -> RequestConfig:
        """The request config a record's columns describe (the inverse of `columns`); a run
        written before records carried `request_config_id` is read back through this."""
        value = {k: (None if is_missing(row.get(k)) else row.get(k)) for k in REQUEST_COLUMNS}
        open_loop: dict[str, Any] = {}
        if value["rate"] is not None:
            open_loop = {
                "rate": float(value["rate"]),
                "arrival": value["arrival"] or "poisson",
                "burstiness": float(value["burstiness"] or 1.0),
                "max_concurrency": _int(value["max_concurrency"]),
            }
        return cls.make(
            temperature_of(row),
            int(value["max_tokens"] or 0),
            _int(value["concurrency"]),
            None if value["top_p"] is None else float(value["top_p"]),
            **open_loop,
            top_k=_int(value["top_k"]),
            features=from_columns(row),
        )

    def columns(self) -> dict[str, Any]:
        """The record columns that say what this config asked for (its id among them)."""
        out = {"request_config_id": self.id, **{k: getattr(self, k) for k in REQUEST_COLUMNS}}
        for feature in FEATURES:
            out[feature.column] = feature.column_value(out[feature.column])
        return out

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def comparison_key(self) -> tuple[Any, ...]:
        """What must be equal for two points to be compared (speedup, determinism): every
        column of the config."""
        return tuple(getattr(self, k) for k in REQUEST_COLUMNS)

    @property
    def sampling_key(self) -> tuple[Any, ...]:
        """What decides the distribution a request samples from (its load and the logprobs it
        asks do not; every processor does): points with one key on one server share their
        samples (`determinism.samples`)."""
        deciding = tuple(getattr(self, f.name) for f in FEATURES if f.decides_distribution)
        return (self.temperature, self.top_p, self.top_k, self.max_tokens, *deciding)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON: an infinite rate is "inf", as in the spec (JSON has none)."""
        own = [f.name for f in fields(self) if f.name not in BY_NAME]
        out = {name: getattr(self, name) for name in (*own, *BY_NAME)}
        # Added later: plans that use none of them read as they always did.
        for name in ("top_k", *BY_NAME):
            if out[name] is None:
                del out[name]
        for feature in FEATURES:
            if feature.name in out:
                out[feature.name] = feature.plain(out[feature.name])
        if self.rate is not None and math.isinf(self.rate):
            out["rate"] = "inf"
        return out


#: The record columns of a request config, in order (the seed is per request, not a column of
#: the config: every request of a point has its own).
REQUEST_COLUMNS: tuple[str, ...] = (
    "temperature",
    "max_tokens",
    "concurrency",
    "top_p",
    "rate",
    "arrival",
    "burstiness",
    "max_concurrency",
    "top_k",
    *(f.column for f in FEATURES),
)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
