"""The tree's knobs and their valid ranges, with the words that refuse a value out of range.

The server refuses `--budget -1` with these words, and the sweeper's spec refuses
`grid.budget: [-1]` with the same ones: the two packages never import each other, so the sweeper
holds the same table (`sweeper/config/knobs.py`) and a test holds the two together. Budget 0 is in
range: a tree of no nodes is autoregressive decoding (the engine's AR path). `accept_threshold`
is the one lossy knob, a number in (0, 1].
"""

from __future__ import annotations

from typing import NamedTuple


class KnobRange(NamedTuple):
    """An integer knob's bounds (inclusive) and what the bound means."""

    low: int
    why: str


#: Tree knobs -> their range. A block needs the root and at least one drafted position.
TREE_KNOBS: dict[str, KnobRange] = {
    "budget": KnobRange(0, "tree nodes per verify; 0 is autoregressive decoding"),
    "topk": KnobRange(1, "children per tree node"),
    "block_size": KnobRange(2, "the root and at least one drafted position"),
}


def knob_problem(name: str, value: object) -> str | None:
    """Why `value` is not a valid `name`, or None: `budget must be an integer >= 0, got -1`."""
    knob = TREE_KNOBS[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < knob.low:
        return f"{name} must be an integer >= {knob.low} ({knob.why}), got {value!r}"
    return None


def check_knob(name: str, value: object) -> int:
    """`value` if it is a valid `name`, else ValueError with `knob_problem`'s words."""
    problem = knob_problem(name, value)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, int)
    return value


#: The lossy acceptance knob (SGLang's `threshold_single`): 1 is exact; below it a drafted token
#: at least this probable under the request's tempered, processed target distribution is
#: accepted where the coupled sampler drew another token.
ACCEPT_THRESHOLD_WHY = "1 is exact; below it, a drafted token at least this probable is accepted"


def accept_threshold_problem(value: object) -> str | None:
    """Why `value` is not a valid accept_threshold (a number in (0, 1]), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        why = ACCEPT_THRESHOLD_WHY
        return f"accept_threshold must be a number in (0, 1] ({why}), got {value!r}"
    return None
