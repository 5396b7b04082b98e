"""A server config: one way of starting the engine (each distinct one a restart), with its
stable id, its label and the record columns it writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sweeper.config.columns import SPECULATIVE_KEYS
from sweeper.config.ids import short_hash
from sweeper.config.knobs import Mode, mode_of
from sweeper.config.labels import extra_params, server_label


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

    @classmethod
    def of(cls, flags: Mapping[str, Any], speculative: Mapping[str, Any]) -> ServerConfig:
        """The server config of a grid combination: its `flags` (cuda_graph, extra flags) and
        its values for the speculative keys its engine's mapping uses. Budget 0 makes it the AR
        config of those flags (`mode_of`), which carries no speculative value."""
        if mode_of(speculative) == "ar":
            return cls.make("ar", flags)
        return cls.make("speculative", {**speculative, **flags}, tuple(speculative))

    def again(self, restart: int) -> ServerConfig:
        """The same server started anew as restart `restart` (its id's hash names it; 0's not)."""
        data: dict[str, Any] = {"mode": self.mode, "params": dict(self.params), "restart": restart}
        data = data if restart else {k: v for k, v in data.items() if k != "restart"}
        return replace(self, id=short_hash(data), restart=restart)

    @property
    def extra_params(self) -> dict[str, Any]:
        """Parameters beyond the named server keys and the tree keys (extra runtime flags)."""
        return extra_params(self.params)

    @property
    def label(self) -> str:
        """Readable id part (`sweeper.config.labels`): `b16-k4-bs8-cg1`, `ar-cg1`."""
        return server_label(self.mode, self.params, self.restart)

    @property
    def flags(self) -> dict[str, Any]:
        """The params that are not speculative: an AR baseline with these measures the same
        server without speculation."""
        return {k: v for k, v in self.params.items() if k not in self.speculative_keys}

    @property
    def baseline_key(self) -> str:
        """Hash of the non-speculative params and restart: configs with equal keys share one."""
        return short_hash({**self.flags, "restart": self.restart} if self.restart else self.flags)

    def columns(self, engine: str) -> dict[str, Any]:
        """The record columns that say which server config a row measured: its id, label and
        restart, the engine and mode, the tree keys (None where it has none) and its params."""
        return {
            "server_config_id": self.id,
            "server_label": self.label,
            "restart": self.restart,
            "engine": engine,
            "mode": self.mode,
            **{k: None for k in SPECULATIVE_KEYS},
            **dict(self.params),
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "mode": self.mode, "params": dict(self.params)}
        out = {**out, "restart": self.restart} if self.restart else out
        return {**out, "covers": list(self.covers)} if self.covers else out
