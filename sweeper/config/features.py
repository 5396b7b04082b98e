"""The request features real clients send beyond temperature, top-p and top-k, declared once,
as the fields of `RequestFeatures` (one line each: name, type, default and table row), and read as
one table (`FEATURES`): each one's name (its OpenAI/vLLM spelling, the spec key, the field and the
record column alike), whether it is a grid axis (`scalar`) or a workload field (`structured`),
its id part, what "not used" means, whether it decides the distribution a request samples from,
whether it is a logit processor, its processor family (the penalties: `FAMILIES`, a factor of the
diagnosis) and the value at which it changes nothing. The request config, the request an engine
sends and the processors a judge rebuilds inherit the fields; records, report, proof and
negotiation iterate the table, never their own list: a new feature is one field here.

Every feature is None where not used (nothing is sent). A value has three spellings, one
conversion each way between them, all here:
- frozen, on a `RequestFeatures` (hashable): a float or int for the scalars and
  counts, the regex's text, `stop` a tuple of strings, `logit_bias` a tuple of (token id, bias)
  pairs sorted by token id, `response_format` its canonical JSON text;
- plain, what a request body carries (`plain`): `logit_bias` a dict of token id -> bias,
  `stop` a list, `response_format` a dict;
- the record column (`column_value`, `from_column`; its type `column_type`): numbers as they
  are, the regex as text, the JSON ones as canonical JSON text (a column holds no dicts or
  lists).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from sweeper.config.columns import is_missing
from sweeper.config.ids import fmt, short_hash
from sweeper.config.knobs import LOGIT_BIAS_RANGE

Kind = Literal["scalar", "structured"]
#: How a value is held: a float, an int, text, or one of the JSON shapes.
Codec = Literal["float", "int", "text", "logit_bias", "stop", "response_format"]


#: What a record column of each codec holds, as its writer (`Feature.column_value`) writes it:
#: the JSON shapes as text of that JSON type (the scalars: finite numbers, an int column perhaps
#: read back as a float by pandas, or text).
_COLUMN_JSON: dict[str, type] = {"logit_bias": dict, "stop": list, "response_format": dict}
_COLUMN_SHAPE = {
    "logit_bias": "a JSON object",
    "stop": "a JSON list of strings",
    "response_format": "a JSON object",
}


@dataclass(frozen=True)
class Feature:
    """One request feature: see the module docstring."""

    name: str
    kind: Kind
    codec: Codec
    #: Its id part's prefix: `mp0.1`, `n4`; a hashed one is followed by 6 hex of its value.
    prefix: str
    #: What None (the feature not used, nothing sent) means, in words.
    unused: str
    #: Whether it changes the distribution a request samples from (`logprobs` only reports).
    decides_distribution: bool = True
    #: Whether it acts on each position's logits: a processor a scored judge rebuilds
    #: (`sweeper.proof.scored.processors.Sampling`) and a score records (a stop string ends an
    #: output, `n` repeats it, `logprobs` reports it).
    processor: bool = True
    #: The processor family it belongs to: the features one processor stage applies together
    #: (the three penalties, one pass over the same token counts), so a fault in that stage
    #: shows wherever any of them acts (`FAMILIES`). None: a stage of its own.
    family: str | None = None
    #: The value at which it changes nothing, sent or not (the engine's default: repetition 1,
    #: frequency and presence 0, min-p 0); None: every value sent acts.
    neutral: float | None = None

    @property
    def column(self) -> str:
        """The record column that holds it (its name: one spelling everywhere)."""
        return self.name

    def acts(self, value: Any) -> bool:
        """Whether a frozen value (None: not sent) changes anything: sent, and not neutral."""
        return value is not None and value != self.neutral

    @property
    def column_type(self) -> type:
        """What its record column holds (None aside): a number as it is, anything else as text
        (`column_value`)."""
        return {"float": float, "int": int}.get(self.codec, str)

    @property
    def hashed(self) -> bool:
        """Whether its id part is a digest (a value too long or too free to spell in an id)."""
        return self.codec in ("text", "logit_bias", "stop", "response_format")

    def freeze(self, value: Any) -> Any:
        """The frozen value of a plain one (from the spec or a request body), or of a frozen
        one (unchanged); None stays None."""
        if value is None:
            return None
        if self.codec == "float":
            return float(value)
        if self.codec == "int":
            return int(value)
        if self.codec == "text":
            return str(value)
        if self.codec == "stop":
            return tuple(str(s) for s in value)
        if self.codec == "logit_bias":
            pairs = value.items() if isinstance(value, Mapping) else value
            return tuple(sorted(_bias(k, v) for k, v in pairs))
        data = json.loads(value) if isinstance(value, str) else value
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def plain(self, value: Any) -> Any:
        """What a request body carries for a frozen value (`logit_bias` keyed by int token id:
        an OpenAI body spells the keys as strings, `sweeper.engines.common`)."""
        if value is None:
            return None
        if self.codec == "stop":
            return list(value)
        if self.codec == "logit_bias":
            return dict(value)
        if self.codec == "response_format":
            return json.loads(value)
        return value

    def column_value(self, value: Any) -> Any:
        """The record column's value for a frozen one: the JSON shapes as canonical text."""
        if value is None or self.codec in ("float", "int", "text", "response_format"):
            return value
        if self.codec == "logit_bias":
            return json.dumps({str(k): v for k, v in value}, separators=(",", ":"))
        return json.dumps(list(value), separators=(",", ":"))

    def from_column(self, value: Any) -> Any:
        """The frozen value a record column holds (None for a missing one: None, NaN), or a
        frozen value unchanged. A column no writer could have written (a stop column that is not
        a JSON list of strings, an `n` of 2.5, an infinite float) raises ValueError naming the
        feature: a damaged line, never read as another request."""
        if is_missing(value):
            return None
        if self.codec in _COLUMN_JSON and not isinstance(value, str):
            return self.freeze(value)  # a frozen value (a config's), not a column's text
        if self.codec in _COLUMN_JSON:
            data: Any = json.loads(value)
            if not isinstance(data, _COLUMN_JSON[self.codec]) or (
                isinstance(data, list) and not all(isinstance(s, str) for s in data)
            ):
                raise ValueError(f"a {self.name} column holds {_COLUMN_SHAPE[self.codec]}")
            return self.freeze(data)
        if self.codec == "text":
            if not isinstance(value, str):
                raise ValueError(f"a {self.name} column holds text, not {value!r:.40}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"a {self.name} column holds a number, not {value!r:.40}")
        number = float(value)
        if not math.isfinite(number) or (self.codec == "int" and not number.is_integer()):
            raise ValueError(f"a {self.name} column holds a finite {self.codec}, not {value!r}")
        return self.freeze(value)

    def id_part(self, value: Any) -> str:
        """Its part of a request config id (`rp1.3`, `lb1a2b3c`, `n4`), from a frozen value."""
        if self.hashed:
            return self.prefix + short_hash(self.column_value(value), 6)
        return self.prefix + fmt(value).replace("-", "m")  # "-" separates an id's parts

    def spoken(self, value: Any) -> str:
        """How people read it in a label: `repetition_penalty=1.3`, `logit_bias#1a2b3c`."""
        if self.hashed:
            return f"{self.name}#{self.id_part(value)[len(self.prefix) :]}"
        return f"{self.name}={fmt(value)}"


def _feature(
    kind: Kind,
    codec: Codec,
    prefix: str,
    unused: str,
    *,
    decides_distribution: bool = True,
    processor: bool = True,
    family: str | None = None,
    neutral: float | None = None,
) -> Any:
    """A `RequestFeatures` field: None (not sent) by default, its `Feature` row in its metadata
    (the name is the field's)."""
    row = {
        "kind": kind,
        "codec": codec,
        "prefix": prefix,
        "unused": unused,
        "decides_distribution": decides_distribution,
        "processor": processor,
        "family": family,
        "neutral": neutral,
    }
    return field(default=None, metadata={"feature": row})


@dataclass(frozen=True, kw_only=True)
class RequestFeatures:
    """Every request feature's frozen value, None where not used: the one declaration of the
    features (name, type, default and `Feature` row), in id order (after temperature, top-p and
    top-k, before the load). The request config, the request an engine sends and the processors
    a judge rebuilds are `RequestFeatures` (they inherit these fields, keyword-only, and never
    name them); the record models derive their columns from `FEATURES` (`sweeper.results`)."""

    min_p: float | None = _feature("scalar", "float", "mp", "no min-p cut-off", neutral=0.0)
    repetition_penalty: float | None = _feature(
        "scalar", "float", "rp", "no repetition penalty (1.0)", family="penalties", neutral=1.0
    )
    frequency_penalty: float | None = _feature(
        "scalar", "float", "fp", "no frequency penalty (0)", family="penalties", neutral=0.0
    )
    presence_penalty: float | None = _feature(
        "scalar", "float", "pp", "no presence penalty (0)", family="penalties", neutral=0.0
    )
    #: (token id, bias) pairs, by id.
    logit_bias: tuple[tuple[int, float], ...] | None = _feature(
        "structured", "logit_bias", "lb", "no token biased"
    )
    stop: tuple[str, ...] | None = _feature(
        "structured",
        "stop",
        "st",
        "no stop strings (EOS and max_tokens end it)",
        processor=False,
    )
    #: Canonical JSON text.
    response_format: str | None = _feature("structured", "response_format", "rf", "free text")
    regex: str | None = _feature("structured", "text", "re", "no regex constraint")
    n: int | None = _feature(
        "structured", "int", "n", "one choice per request (n = 1)", processor=False
    )
    #: Top logprobs asked on the measured request.
    logprobs: int | None = _feature(
        "structured",
        "int",
        "lp",
        "no logprobs asked by the workload",
        decides_distribution=False,
        processor=False,
    )

    def feature_values(self, *, plain: bool = False) -> dict[str, Any]:
        """Every request feature's value, frozen or, with `plain`, as a request body carries
        it; None where not used."""
        return {
            f.name: f.plain(getattr(self, f.name)) if plain else getattr(self, f.name)
            for f in FEATURES
        }


#: Every request feature, in id order: `RequestFeatures`' fields.
FEATURES: tuple[Feature, ...] = tuple(
    Feature(f.name, **f.metadata["feature"]) for f in fields(RequestFeatures)
)
BY_NAME: dict[str, Feature] = {f.name: f for f in FEATURES}
#: The grid axes among them (`grid: {min_p: [0, 0.1]}`).
SCALAR_FEATURES: tuple[str, ...] = tuple(f.name for f in FEATURES if f.kind == "scalar")
#: The workload fields among them (`workload: {logit_bias: {...}}`).
STRUCTURED_FEATURES: tuple[str, ...] = tuple(f.name for f in FEATURES if f.kind == "structured")
#: The processor families of two or more features, family -> its features in table order: the
#: diagnosis's derived factors (`penalties`: on where any of them acts).
FAMILIES: dict[str, tuple[str, ...]] = {
    family: members
    for family in dict.fromkeys(f.family for f in FEATURES if f.family is not None)
    if len(members := tuple(f.name for f in FEATURES if f.family == family)) >= 2
}


def used(values: Mapping[str, Any]) -> Iterator[tuple[Feature, Any]]:
    """The features `values` (a config's frozen values or a record row) uses, in table order,
    each with its frozen value (a record row's columns are read back)."""
    for feature in FEATURES:
        value = feature.from_column(values.get(feature.name))
        if value is not None:
            yield feature, value


def from_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """Every feature's frozen value a record row's columns hold (None: missing), by name: the
    keyword arguments of a `RequestFeatures`."""
    return {f.name: f.from_column(row.get(f.column)) for f in FEATURES}


def feature_labels(row: Mapping[str, Any]) -> list[str]:
    """The features a config or record row uses, as people read them (`min_p=0.1`, ...)."""
    return [feature.spoken(value) for feature, value in used(row)]


def _bias(token: Any, bias: Any) -> tuple[int, float]:
    """One (token id, bias) pair, checked: an integer id, a finite bias in LOGIT_BIAS_RANGE (a
    column read back from disk is checked as a spec value is)."""
    value = float(bias)
    low, high = LOGIT_BIAS_RANGE["ge"], LOGIT_BIAS_RANGE["le"]
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"logit bias {bias!r} on token {token!r} is not in [{low:g}, {high:g}]")
    return int(token), value
