"""Parameter mapping as data: where each grid key of a speculative config goes on an engine.

A mapping (a built-in preset, or one a spec declares for its own fork) says which grid keys a
speculative method uses and where each goes: a flag (`--speculative-num-draft-tokens 16`), an
environment variable (`SGLANG_DDTREE_MAX_TOPK=4`), or a key inside a JSON flag (vLLM's
`--speculative-config '{"num_speculative_tokens": 4}'`), with an offset for forks that count
differently (a budget of B given as `num_draft_tokens = B + 1`). It also holds what every
speculative config of the method carries (`--speculative-algorithm DDTREE`, `{"method": "ngram"}`)
and, per grid key it does not use, why: `sweeper validate` refuses such an axis instead of
measuring one server under several labels.

This module is plain data and rendering; it imports nothing of the sweeper, so the spec can
validate against it and the plan can ask it which keys are speculative.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints, model_validator

FlagName = Annotated[str, StringConstraints(pattern=r"^--[a-z0-9][a-z0-9-]*$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
JsonValue = str | int | float | bool | None


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamTarget(_Data):
    """Where one grid value goes: exactly one of `flag`, `env`, or `json_flag` + `json_key`."""

    flag: FlagName | None = None
    env: EnvName | None = None
    json_flag: FlagName | None = None
    json_key: Annotated[str, StringConstraints(min_length=1)] | None = None
    #: Added to an integer value before it is written (a fork counting one more or less).
    offset: StrictInt = 0

    @model_validator(mode="after")
    def _one_place(self) -> ParamTarget:
        places = [self.flag is not None, self.env is not None, self.json_flag is not None]
        if sum(places) != 1:
            raise ValueError("a target needs exactly one of flag, env or json_flag")
        if (self.json_flag is None) != (self.json_key is None):
            raise ValueError("json_flag and json_key go together")
        return self

    def where(self) -> str:
        """How the target reads in messages: `--flag`, `env NAME`, `--json-flag.key`."""
        if self.flag:
            return self.flag
        if self.env:
            return f"env {self.env}"
        return f"{self.json_flag}.{self.json_key}"


class EffectiveRules(_Data):
    """An engine's own rules for what a speculative config really runs, as data (evaluated by
    `sweeper.catalog.effective`): two labels whose effective configs are equal are one server
    behaviour, measured once."""

    #: Where the rules were read (repository, commit, file and function).
    source: str = ""
    #: budget <= block_size - 1 drafts a plain chain of `budget` tokens: topk is unused.
    chain_at_budget_below_block: bool = False
    #: Above that, the tree's width is min(max(budget // (block_size - 1) + 1, 2), topk cap)
    #: (the vocabulary, a third bound, is never the smaller for a real model).
    width_from_budget_per_block: bool = False
    #: The topk cap when the grid sets none (an environment variable's default).
    topk_default: int | None = None
    #: Values the engine forces whatever was asked (name -> value, e.g. DFLASH's topk 1).
    forced: dict[str, JsonValue] = Field(default_factory=dict)


class EngineMapping(_Data):
    """How an engine is told to speculate with one method, and which grid keys that uses."""

    #: What the method is, for people: shown by `sweeper plan`.
    description: str = ""
    #: Arguments every speculative config of the method carries.
    speculative_args: list[str] = Field(default_factory=list)
    #: Environment every speculative config of the method carries.
    speculative_env: dict[EnvName, str] = Field(default_factory=dict)
    #: Fixed keys of JSON flags (flag -> keys), merged with the mapped grid values.
    speculative_json: dict[FlagName, dict[str, JsonValue]] = Field(default_factory=dict)
    #: Grid key -> where its value goes. Keys named here are speculative: an AR config has none.
    params: dict[str, ParamTarget] = Field(default_factory=dict)
    #: Where the runtime's `draft` goes on a speculative config (None: the method has no model).
    draft: ParamTarget | None = None
    #: Speculative grid keys the method does not use -> why (validate quotes it).
    unused: dict[str, str] = Field(default_factory=dict)
    #: The engine's rules for what a config effectively runs (None: every label is its own).
    effective: EffectiveRules | None = None


class Speculative(NamedTuple):
    """One speculative config under a mapping: its argv elements, its environment, and what
    its flags set, by the engine's field names (`field_name`), the value each flag was given."""

    argv: list[str]
    env: dict[str, str]
    fields: dict[str, Any]


def render(mapping: EngineMapping, values: Mapping[str, Any], draft: str | None) -> Speculative:
    """The argv elements, environment and flag values of one speculative config.

    `values` holds the config's grid values for the mapping's params (others are ignored: the
    caller renders them as plain flags). JSON flags come last, each once, with sorted keys.
    """
    argv = list(mapping.speculative_args)
    fields = snippet_fields(mapping.speculative_args)
    env = dict(mapping.speculative_env)
    blobs: dict[str, dict[str, Any]] = {k: dict(v) for k, v in mapping.speculative_json.items()}
    placed = [(target, values[key]) for key, target in mapping.params.items() if key in values]
    if mapping.draft is not None and draft is not None:
        placed.append((mapping.draft, draft))
    for target, raw in placed:
        value = _shifted(raw, target.offset)
        if target.flag:
            argv += flag_argv(target.flag, value)
            fields[field_name(target.flag)] = value
        elif target.env:
            env[target.env] = _text(value)
        else:
            assert target.json_flag is not None and target.json_key is not None
            blobs.setdefault(target.json_flag, {})[target.json_key] = value
    for flag, blob in blobs.items():
        argv += [flag, json.dumps(blob, sort_keys=True, separators=(",", ":"))]
        fields[field_name(flag)] = blob
    return Speculative(argv, env, fields)


def field_name(flag: str) -> str:
    """The field a server reports a flag's value under: `--x-y` -> `x_y`."""
    return flag.removeprefix("--").replace("-", "_")


def snippet_fields(args: Sequence[str]) -> dict[str, Any]:
    """What an argv snippet written as data sets (a mapping's `speculative_args`, a record's
    CUDA-graph flags, a spec's `runtime.extra_args`): `--x-y 8` -> {"x_y": 8}, `--flag` ->
    {"flag": True}, values typed as JSON reads them. Data is read, never a built command line:
    what a rendered config's own values set is taken from those values."""
    fields: dict[str, Any] = {}
    i = 0
    while i < len(args):
        name = field_name(args[i])
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            fields[name] = _typed(args[i + 1])
            i += 2
        else:
            fields[name] = True
            i += 1
    return fields


def _typed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def flag_argv(flag: str, value: Any) -> list[str]:
    """`--x 8` for a value, `--x` / `--no-x` for a bool (argparse's BooleanOptionalAction)."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [flag] if value else [f"--no-{flag.removeprefix('--')}"]
    return [flag, _text(value)]


def _shifted(value: Any, offset: int) -> Any:
    if not offset:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"an offset needs an integer value, not {value!r}")
    return value + offset


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
