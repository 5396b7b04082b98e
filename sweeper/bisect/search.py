"""Binary search over an ordered range of commits, with skips: the pure part of a bisect.

Commits are indices 0..n-1, oldest first, after the good end (which is index -1, known good);
the bad end is n-1. An outcome is `good`, `bad` or `skip` (a commit that could not be judged:
it did not start, or its measurement stayed inside the threshold's noise). As `git bisect skip`
does, a skipped commit is stepped around: the next commit tried is the untested one nearest the
middle of what is left, and when only skipped commits stand between the last good and the first
bad one, the answer is that range, never a guess inside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Outcome = Literal["good", "bad", "skip"]


@dataclass(frozen=True)
class Bounds:
    """What the outcomes so far pin down: the last good index (-1: the good end), the first bad
    one, and the untested candidates strictly between them."""

    last_good: int
    first_bad: int
    untested: tuple[int, ...]
    skipped: tuple[int, ...]


def bounds(n: int, outcomes: Mapping[int, Outcome]) -> Bounds:
    """The bounds the outcomes give over `n` commits (the bad end, n-1, counts as bad)."""
    bad = [i for i, o in outcomes.items() if o == "bad"] + [n - 1]
    first_bad = min(bad)
    good = [i for i, o in outcomes.items() if o == "good" and i < first_bad]
    last_good = max(good, default=-1)
    between = range(last_good + 1, first_bad)
    untested = tuple(i for i in between if i not in outcomes)
    skipped = tuple(i for i in between if outcomes.get(i) == "skip")
    return Bounds(last_good, first_bad, untested, skipped)


def next_commit(n: int, outcomes: Mapping[int, Outcome]) -> int | None:
    """The index to measure next, None when the culprit (or the skipped range) is known."""
    b = bounds(n, outcomes)
    if not b.untested:
        return None
    middle = (b.last_good + b.first_bad) / 2
    # Nearest the middle; on a tie the older one, so the order never depends on dict order.
    return min(b.untested, key=lambda i: (abs(i - middle), i))


def culprits(n: int, outcomes: Mapping[int, Outcome]) -> tuple[int, ...]:
    """When the search is done: the first bad commit alone, or, when skipped commits stand
    right before it, those and it (one of them is the culprit)."""
    b = bounds(n, outcomes)
    if b.untested:
        raise ValueError("the search is not done: commits are left untested")
    return (*b.skipped, b.first_bad)


def steps_bound(n: int) -> int:
    """Measured steps a range of n commits takes without skips: both ends, then
    ceil(log2 n) halvings."""
    return 2 + math.ceil(math.log2(n)) if n > 1 else 2
