"""n > 1: each choice of a request is an output of its own, judged by the one pairing rule. At
temperature 0 every choice is the greedy output (the choices of a prompt are compared as its
repeats are); sampled, choice i is its own draw, paired with the AR baseline's choice i at the
same seed and n, and never compared with the other choices."""

from __future__ import annotations

from sweeper.proof.determinism import judge_point

IDS = [10, 11, 12, 13, 14, 15]
OTHER = [20, 21, 22, 23, 24, 25]


def rec(choice: int, ids: list[int], repeat: int = 0) -> dict[str, object]:
    text = " ".join(map(str, ids))
    return {"prompt_id": "p", "repeat": repeat, "choice": choice, "token_ids": ids, "text": text}


def _verdicts(result: object) -> list[tuple[int, int, str, int | None]]:
    return [(v.repeat, v.choice, v.verdict, v.divergence_index) for v in result.requests]  # type: ignore[attr-defined]


def test_a_greedy_choice_that_diverges_is_caught_beside_an_exact_one() -> None:
    base = [rec(c, IDS, r) for r in (0, 1) for c in (0, 1)]
    wrong = IDS[:3] + [99, 99, 99]
    rows = [rec(0, IDS), rec(1, wrong)]
    result = judge_point(rows, base, temperature=0.0)
    assert result.status == "nondeterministic"
    assert _verdicts(result) == [(0, 0, "exact", None), (0, 1, "nondeterministic", 3)]
    assert result.requests[1].compared_with == "repeat 0"
    # Alone (n = 1 rows carry no choice column): the wrong output is a divergence.
    alone = judge_point([{**rows[1], "choice": None}], base, temperature=0.0)
    assert _verdicts(alone) == [(0, 0, "diverged", 3)]


def test_sampled_choices_pair_with_the_baselines_same_choice() -> None:
    base = [rec(c, ids, r) for r in (0, 1) for c, ids in ((0, IDS), (1, OTHER))]
    same = [rec(c, ids, r) for r in (0, 1) for c, ids in ((0, IDS), (1, OTHER))]
    coupled = {"temperature": 0.8, "seed": 3, "sampled_check": "coupled"}
    result = judge_point(same, base, **coupled)  # type: ignore[arg-type]
    assert result.status == "exact"  # choices differ from each other: independent draws
    wrong = OTHER[:2] + [99] * 4
    rows = [rec(0, IDS, r) for r in (0, 1)] + [rec(1, wrong, r) for r in (0, 1)]
    result = judge_point(rows, base, **coupled)  # type: ignore[arg-type]
    assert result.status == "diverged"
    assert _verdicts(result) == [
        (0, 0, "exact", None),
        (0, 1, "diverged", 2),
        (1, 0, "exact", None),
        (1, 1, "diverged", 2),
    ]
