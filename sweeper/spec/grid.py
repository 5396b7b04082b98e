"""The `grid:` section: lists whose product is the sweep, plus `exclude` / `include` rules.

Server keys decide restarts, request keys never do; any other snake_case key is an extra runtime
flag (`--flag-name value`).
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from sweeper.config import REQUEST_KEYS, SERVER_KEYS
from sweeper.config.knobs import RANGES, flag_problem, knob_problem
from sweeper.spec.base import INT64_MAX, INT64_MIN, Int, Number
from sweeper.spec.errors import problem, suggest
from sweeper.spec.open_loop import LoadSpec
from sweeper.spec.workload import WorkloadSpec

#: The workload's load keys a rule may name: a point has one of them, never both.
LOAD_KEYS = ("concurrency", "rate")
# The grid's server keys (SERVER_KEYS, each distinct combination a restart) and those only
# speculative decoding has (SPECULATIVE_KEYS) are the record columns' own lists.
#: Flags decided by the sweeper itself for each launch; a grid cannot set them.
RESERVED_FLAGS = ("host", "port", "launch_id", "speculative")
_FLAG_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _same_value(a: Any, b: Any) -> bool:
    """Equal and of the same kind: True and 1 are different grid values."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def flag_value_problem(value: Any) -> str | None:
    """Why a value cannot be an extra runtime flag's, or None: a number (int64, finite), a
    string without control characters (it reaches argv and unit files) or a bool."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else "an integer must fit in int64"
    if isinstance(value, float):
        return None if math.isfinite(value) else "a number must be finite"
    if isinstance(value, str):
        return "a flag value must have no control characters" if _CONTROL.search(value) else None
    return "a runtime flag value must be a number, a string or a bool"


def _knob(name: str) -> AfterValidator:
    """A tree knob's range check, in the words the runtime's server refuses it with."""

    def check(value: int) -> int:
        wrong = knob_problem(name, value)
        if wrong is not None:
            raise problem(wrong)
        return value

    return AfterValidator(check)


def _dashed(name: str) -> str:
    return name.replace("_", "-")


class GridSpec(BaseModel):
    """Lists whose product is the sweep. Other runtime flags may be added as lists too.

    `exclude` drops grid points matching every key of a rule (a rule value may be a list of
    alternatives); `include` adds points: missing keys take every value of the grid's list.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    # Each knob's range is the config room's (`sweeper.config.knobs`), checked here only.
    budget: list[Annotated[Int, _knob("budget")]] = Field(
        default_factory=lambda: [16], min_length=1
    )
    topk: list[Annotated[Int, _knob("topk")]] = Field(default_factory=lambda: [4], min_length=1)
    block_size: list[Annotated[Int, _knob("block_size")]] = Field(
        default_factory=lambda: [8], min_length=1
    )
    cuda_graph: list[StrictBool] = Field(default_factory=lambda: [False], min_length=1)
    temperature: list[Annotated[Number, Field(**RANGES["temperature"])]] = Field(
        default_factory=lambda: [0.0], min_length=1
    )
    top_p: list[Annotated[Number, Field(**RANGES["top_p"])]] | None = Field(
        default=None, min_length=1
    )
    #: Sample from the k most likely tokens only (unset: the engine's default, no cut-off).
    top_k: list[Annotated[Int, Field(**RANGES["top_k"])]] | None = Field(default=None, min_length=1)
    # The scalar request features (`sweeper.config.features`; unset: not sent).
    min_p: list[Annotated[Number, Field(**RANGES["min_p"])]] | None = Field(
        default=None, min_length=1
    )
    repetition_penalty: list[Annotated[Number, Field(**RANGES["repetition_penalty"])]] | None = (
        Field(default=None, min_length=1)
    )
    frequency_penalty: list[Annotated[Number, Field(**RANGES["frequency_penalty"])]] | None = Field(
        default=None, min_length=1
    )
    presence_penalty: list[Annotated[Number, Field(**RANGES["presence_penalty"])]] | None = Field(
        default=None, min_length=1
    )
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    include: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _check_extra_flags(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = [k for k in cls.model_fields]
        for key, values in data.items():
            if key in known:
                continue
            if not isinstance(key, str) or difflib.get_close_matches(key, known, n=1, cutoff=0.75):
                raise problem(suggest(str(key), known), at=(key,))
            if key in RESERVED_FLAGS:
                raise problem(
                    f"{key!r} is set by the sweeper for each launch, not in the grid", at=(key,)
                )
            if not _FLAG_NAME.match(key):
                raise problem(
                    f"runtime flag {key!r} must be snake_case (it becomes --{_dashed(key)})",
                    at=(key,),
                )
            if not isinstance(values, list) or not values:
                raise problem(f"grid value for {key!r} must be a non-empty list", at=(key,))
            for index, value in enumerate(values):
                wrong = flag_value_problem(value) or flag_problem(key, value)
                if wrong:
                    raise problem(wrong, at=(key, index))
        return data

    @model_validator(mode="after")
    def _check_rules(self) -> GridSpec:
        keys = self.keys()
        for key in keys:
            if key in LOAD_KEYS:
                continue
            values = self.values(key)
            for index, value in enumerate(values):
                if any(_same_value(value, earlier) for earlier in values[:index]):
                    raise problem(f"duplicate value {value!r}", at=(key, index))
        for rule_kind in ("exclude", "include"):
            for index, rule in enumerate(getattr(self, rule_kind)):
                if not rule:
                    raise problem("an empty rule matches everything", at=(rule_kind, index))
                if all(key in rule for key in LOAD_KEYS):
                    message = (
                        "a point is either closed-loop (concurrency) or open-loop (rate), "
                        "never both"
                    )
                    raise problem(message, at=(rule_kind, index, "rate"))
                for key, value in rule.items():
                    if key not in keys:
                        raise problem(suggest(key, keys), at=(rule_kind, index, key))
                    self._check_rule_value(key, value, at=(rule_kind, index, key))
        return self

    def _check_rule_value(self, key: str, value: Any, at: tuple[str | int, ...]) -> None:
        values = value if isinstance(value, list) else [value]
        if not values:
            raise problem("an empty list matches nothing", at=at)
        if self._rule_field(key) is None:  # an extra flag: same shape check as the grid's list
            wrong = next(filter(None, map(flag_value_problem, values)), None)
            if wrong:
                raise problem(wrong, at=at)
            return
        try:
            self.rule_values(key, value)
        except ValidationError as exc:
            raise problem(exc.errors()[0]["msg"], at=at) from None

    def _rule_field(self, key: str) -> Any:
        if key == "concurrency":
            return WorkloadSpec.model_fields["concurrency"]
        if key == "rate":
            return LoadSpec.model_fields["rate"]
        return type(self).model_fields.get(key)

    def rule_values(self, key: str, value: Any) -> list[Any]:
        """A rule's value for `key` as the alternatives it matches, parsed like the key's own
        list (so a rule's `rate: inf` matches the points at rate infinity)."""
        values = value if isinstance(value, list) else [value]
        field = self._rule_field(key)
        if field is None:
            return values
        parsed = TypeAdapter(field.annotation or Any).validate_python(values)
        return list(parsed) if parsed is not None else values

    def extra_flags(self) -> dict[str, list[Any]]:
        """Runtime flags beyond the named ones, in spec order: name -> values."""
        return dict(self.model_extra or {})

    def keys(self) -> list[str]:
        """Every key a rule may name: the named parameters, the load keys, the extra flags."""
        return [*SERVER_KEYS, *REQUEST_KEYS, *LOAD_KEYS, *self.extra_flags()]

    def values(self, key: str) -> list[Any]:
        """The grid's list for `key` ([None] for an unset optional request key like top_p)."""
        if key in self.extra_flags():
            return list(self.extra_flags()[key])
        value = getattr(self, key)
        return [None] if value is None else list(value)
