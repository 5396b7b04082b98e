"""The pure search of a bisect: for every range of 1..33 commits and every culprit in it, the
search names exactly the culprit within `steps_bound` measured steps; a skipped commit right
before the culprit turns the answer into a range (never a guess inside it), one elsewhere does
not hide the culprit, all skipped gives them all; no commit is measured twice, and `culprits`
refuses to answer while commits are left untested."""

from __future__ import annotations

import random
from collections.abc import Collection

import pytest

from sweeper.bisect.search import Bounds, Outcome, bounds, culprits, next_commit, steps_bound

MAX_N = 33


def simulate(n: int, culprit: int, skipped: Collection[int] = ()) -> tuple[tuple[int, ...], int]:
    """Bisect `n` commits whose first bad one is `culprit` (index >= culprit is bad), `skipped`
    ones unjudgeable: the answer and the measured steps (both ends, then each commit tried)."""
    outcomes: dict[int, Outcome] = {}  # the bad end, n-1, is bad without being recorded
    steps = 2
    for _ in range(n + 1):  # each step measures a new commit: at most n-1 of them
        index = next_commit(n, outcomes)
        if index is None:
            return culprits(n, outcomes), steps
        assert 0 <= index < n - 1, f"n={n}: {index} is outside the untested range"
        assert index not in outcomes, f"n={n}: {index} measured twice"
        steps += 1
        outcomes[index] = "skip" if index in skipped else ("bad" if index >= culprit else "good")
    raise AssertionError(f"n={n} culprit={culprit}: the search did not end")


def test_steps_bound_is_both_ends_then_the_halvings() -> None:
    expected = {1: 2, 2: 3, 3: 4, 4: 4, 5: 5, 8: 5, 9: 6, 16: 6, 17: 7, 33: 8}
    assert {n: steps_bound(n) for n in expected} == expected


@pytest.mark.parametrize("n", range(1, MAX_N + 1))
def test_every_culprit_is_found_alone_within_the_bound(n: int) -> None:
    for culprit in range(n):
        found, steps = simulate(n, culprit)
        assert found == (culprit,), f"n={n} culprit={culprit}"
        assert steps <= steps_bound(n), f"n={n} culprit={culprit}: {steps} steps"


def test_one_commit_is_the_culprit_without_measuring_anything() -> None:
    assert next_commit(1, {}) is None
    assert culprits(1, {}) == (0,)


@pytest.mark.parametrize("n", range(2, MAX_N + 1))
def test_a_skip_right_before_the_culprit_gives_the_range_never_a_blame(n: int) -> None:
    for culprit in range(1, n):
        found, _ = simulate(n, culprit, skipped={culprit - 1})
        assert found == (culprit - 1, culprit), f"n={n} culprit={culprit}"


@pytest.mark.parametrize("n", range(2, MAX_N + 1))
def test_a_skip_elsewhere_does_not_hide_the_culprit(n: int) -> None:
    for culprit in range(n):
        for skip in range(n - 1):  # the bad end is never measured, so never skipped
            if skip in (culprit - 1, culprit):
                continue
            found, _ = simulate(n, culprit, skipped={skip})
            assert found == (culprit,), f"n={n} culprit={culprit} skip={skip}"


@pytest.mark.parametrize("n", range(3, MAX_N + 1))
def test_a_skipped_culprit_gives_it_and_the_next_bad_one(n: int) -> None:
    for culprit in range(n - 1):
        found, _ = simulate(n, culprit, skipped={culprit})
        assert found == (culprit, culprit + 1), f"n={n} culprit={culprit}"


@pytest.mark.parametrize("n", range(1, MAX_N + 1))
def test_all_skipped_gives_every_commit_and_the_bad_end(n: int) -> None:
    found, steps = simulate(n, n - 1, skipped=range(n - 1))
    assert found == tuple(range(n))
    assert steps == 2 + (n - 1)  # every commit was tried once, none twice


def test_next_commit_never_returns_a_measured_index() -> None:
    rng = random.Random(20260701)
    choices: tuple[Outcome, ...] = ("good", "bad", "skip")
    for _ in range(3000):
        n = rng.randint(1, MAX_N)
        measured = rng.sample(range(n - 1), rng.randint(0, n - 1)) if n > 1 else []
        outcomes: dict[int, Outcome] = {i: rng.choice(choices) for i in measured}
        index = next_commit(n, outcomes)
        if index is None:
            assert not bounds(n, outcomes).untested
        else:
            assert index not in outcomes
            assert index in bounds(n, outcomes).untested


def test_the_next_commit_does_not_depend_on_the_order_outcomes_came_in() -> None:
    forward: dict[int, Outcome] = {2: "good", 5: "skip", 9: "bad"}
    backward: dict[int, Outcome] = dict(reversed(forward.items()))
    assert next_commit(12, forward) == next_commit(12, backward) == 6  # 5 is skipped: 6 is next


def test_bounds_count_the_bad_end_as_bad_and_ignore_a_good_after_a_bad() -> None:
    assert bounds(6, {}) == Bounds(-1, 5, (0, 1, 2, 3, 4), ())
    b = bounds(8, {1: "good", 3: "bad", 4: "good", 2: "skip"})
    assert (b.last_good, b.first_bad, b.untested, b.skipped) == (1, 3, (), (2,))


def test_culprits_refuses_while_commits_are_untested() -> None:
    with pytest.raises(ValueError, match="untested"):
        culprits(8, {})
    with pytest.raises(ValueError, match="untested"):
        culprits(8, {3: "good", 6: "bad", 4: "skip"})  # 5 is untested
    assert culprits(8, {3: "good", 6: "bad", 4: "skip", 5: "skip"}) == (4, 5, 6)
