"""A server config rendered for one engine: one split of the config, and from it the command
line, its environment, and the config the server must report (`Rendered.expected`), each value
taken from the config, never read back out of the argv it made.

A grid key that names a runtime setting (`dtype`, `max_batch`, ...) overrides the runtime
section's value; the engine decides the setting's flag name. Other grid keys the mapping does
not place become `--key-with-dashes value` flags, in spec order, after the settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweeper.catalog.mapping import EngineMapping, field_name, flag_argv, render, snippet_fields
from sweeper.catalog.records import SETTINGS
from sweeper.config import SPEED_BASELINE, ServerConfig
from sweeper.engines.base import EngineError
from sweeper.spec import RuntimeSpec


@dataclass(frozen=True)
class ConfigParts:
    """A server config split by where its values go."""

    #: Values of the mapping's speculative keys (empty for an AR config).
    speculative: dict[str, Any]
    #: cuda_graph, when the engine has one.
    cuda_graph: bool | None
    #: Runtime settings (spec values, grid overrides applied); None means "engine default".
    settings: dict[str, Any]
    #: Every other grid flag, as the spec ordered them.
    extras: dict[str, Any]


def split_config(server_config: ServerConfig, runtime: RuntimeSpec) -> ConfigParts:
    """Split a server config into speculative values, cuda_graph, settings and extra flags."""
    params = dict(server_config.params)
    params.pop(SPEED_BASELINE, None)  # not a flag: `extra_args_of` applies it
    speculative = {k: params.pop(k) for k in server_config.speculative_keys if k in params}
    cuda_graph = params.pop("cuda_graph", None)
    settings = {key: params.pop(key, getattr(runtime, key)) for key in SETTINGS}
    return ConfigParts(speculative, cuda_graph, settings, params)


def extra_args_of(server_config: ServerConfig, runtime: RuntimeSpec) -> list[str]:
    """`runtime.extra_args`, with `runtime.speed_baseline`'s changes on the speed baseline:
    `--key value` replaced (or added), a None value dropping `--key` and its value."""
    args = list(runtime.extra_args)
    if not server_config.params.get(SPEED_BASELINE) or not runtime.speed_baseline:
        return args
    for key, value in runtime.speed_baseline.items():
        flag = "--" + key.replace("_", "-")
        if flag in args:
            at = args.index(flag)
            has_value = at + 1 < len(args) and not args[at + 1].startswith("--")
            del args[at : at + (2 if has_value else 1)]
        if value is not None:
            args += [flag, value]
    return args


@dataclass
class Rendered:
    """A server config's command line (flags only: no python, --host, --port or launch id),
    its environment, and what the server must report for it, by the engine's field names."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)

    def flag(self, flag: str, value: Any) -> None:
        """`flag value` (a bool: `--x` / `--no-x`); the server reports `value` (None: unset)."""
        self.argv += flag_argv(flag, value)
        if value is not None:
            self.expected[field_name(flag)] = value

    def expect(self, name: str, value: Any) -> None:
        """A field the server must report that no flag of its own names."""
        self.expected[name] = value

    def snippet(self, args: Sequence[str], *, reported: bool) -> None:
        """An argv snippet written as data, as written; where the engine reports such flags
        under their own names (`reported`), what the data sets is expected too."""
        self.argv += args
        if reported:
            self.expected.update(snippet_fields(args))

    def speculative(
        self, mapping: EngineMapping, values: Mapping[str, Any], draft: str | None
    ) -> None:
        """The mapping's flags, environment and JSON flags for these speculative values."""
        rendered = render(mapping, values, draft)
        self.argv += rendered.argv
        self.env.update(rendered.env)
        self.expected.update(rendered.fields)

    def settings(
        self,
        parts: ConfigParts,
        names: Mapping[str, str | None],
        *,
        renames: Mapping[str, str] | None = None,
    ) -> None:
        """Flags for the settings (named by `names`; a None name means the engine has none, so
        the value must be unset) and the extra grid flags (`--key`, renamed where `renames`
        says)."""
        for key, value in parts.settings.items():
            if value is None:
                continue
            flag = names.get(key)
            if flag is None:
                raise EngineError(f"the engine has no flag for runtime.{key} ({value!r})")
            self.flag(flag, value)
        for key, value in parts.extras.items():
            self.flag("--" + (renames or {}).get(key, key).replace("_", "-"), value)
