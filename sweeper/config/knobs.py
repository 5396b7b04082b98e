"""Each grid knob's valid range, in one place, and the rule that makes a server config AR.

The tree knobs' ranges (`TREE_KNOBS`) are checked at the spec, and nowhere else in the
controller. The runtime's server refuses the same ranges with the same words: the controller and
the runtime never import each other (the runtime ships alone to hosts), so the runtime holds its
own table (`ddtree_runtime/knobs.py`) and a test holds the two to one another, value by value and
word by word. The request knobs' ranges are the spec's field bounds (`RANGES`); the ranges of
server knobs given as extra grid flags (`accept_threshold`) are `FLAG_RANGES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

Mode = Literal["ar", "speculative"]


class KnobRange(NamedTuple):
    """An integer knob's lowest valid value and what that bound means."""

    low: int
    why: str


#: Tree knobs -> their range. A block needs the root and at least one drafted position.
TREE_KNOBS: dict[str, KnobRange] = {
    "budget": KnobRange(0, "tree nodes per verify; 0 is autoregressive decoding"),
    "topk": KnobRange(1, "children per tree node"),
    "block_size": KnobRange(2, "the root and at least one drafted position"),
}


def knob_problem(name: str, value: object) -> str | None:
    """Why `value` is not a valid `name`, or None: `budget must be an integer >= 0 (..), got -1`."""
    knob = TREE_KNOBS[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < knob.low:
        return f"{name} must be an integer >= {knob.low} ({knob.why}), got {value!r}"
    return None


#: Request knobs' bounds as pydantic field constraints (`Field(**RANGES[key])`).
RANGES: dict[str, dict[str, float]] = {
    "temperature": {"ge": 0},
    "top_p": {"gt": 0, "le": 1},
    "top_k": {"ge": 1},
    "min_p": {"ge": 0, "le": 1},
    # vLLM's: > 0, 1 is none; above 1 discourages a repeat, below 1 encourages it.
    "repetition_penalty": {"gt": 0},
    # OpenAI's documented range.
    "frequency_penalty": {"ge": -2, "le": 2},
    "presence_penalty": {"ge": -2, "le": 2},
    "n": {"ge": 1},
    # OpenAI's top_logprobs range (a completions request's `logprobs` takes up to 5 there).
    "logprobs": {"ge": 0, "le": 20},
}


class FlagRange(NamedTuple):
    """A number knob's open lower and closed upper bound and what the value means."""

    above: float
    most: float
    why: str


#: Server knobs given as extra grid flags (no named grid key) -> their range; checked at the
#: spec (`sweeper.spec.grid`). The runtime refuses the same range (`--accept-threshold`).
FLAG_RANGES: dict[str, FlagRange] = {
    "accept_threshold": FlagRange(
        0.0,
        1.0,
        "1 is exact; below it, a drafted token at least this probable is accepted",
    ),
}


def flag_problem(name: str, value: object) -> str | None:
    """Why `value` is not a valid `name` of `FLAG_RANGES`, or None (a flag without a range)."""
    knob = FLAG_RANGES.get(name)
    if knob is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not knob.above < value <= knob.most:  # type: ignore[operator]
        bounds = f"({knob.above:g}, {knob.most:g}]"
        return f"{name} must be a number in {bounds} ({knob.why}), got {value!r}"
    return None


#: A logit bias's range per token (OpenAI's).
LOGIT_BIAS_RANGE: dict[str, float] = {"ge": -100, "le": 100}


def mode_of(speculative: Mapping[str, Any]) -> Mode:
    """The one rule: a server config whose tree budget is 0 is autoregressive decoding (a tree
    of no nodes), whatever else it sets. `speculative` holds the config's values for the keys
    its engine's mapping uses (an engine without a budget knob is always speculative)."""
    return "ar" if speculative.get("budget") == 0 else "speculative"
