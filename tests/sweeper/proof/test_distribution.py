"""The two-sample test on token sequences: exact statistics, calibrated p-values, and power
against the shifts it is for, on sequences drawn from known distributions (seeded, so every
outcome here is fixed)."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.proof.distribution import (
    STATISTICS,
    _labellings,
    _statistics,
    padded,
    pooled,
    two_sample_test,
)

VOCAB, LENGTH = 12, 10


def _model(seed: int = 7) -> np.ndarray:
    """A small 'language model': next-token logits from (previous token, position)."""
    return np.random.default_rng(seed).normal(0.0, 2.0, size=(VOCAB + 1, LENGTH, VOCAB))


def draw(
    n: int,
    *,
    temperature: float = 1.0,
    prompts: int = 3,
    seed: int = 0,
    swap: bool = False,
) -> dict[str, list[list[int]]]:
    """n sequences per prompt; `swap` moves mass between the two likeliest tokens at every
    step (a shift that keeps the number of likely tokens: a biased acceptance)."""
    rng = np.random.default_rng(seed)
    logits = _model()
    out = {}
    for prompt in range(prompts):
        rows = []
        for _ in range(n):
            previous, row = VOCAB, []
            for t in range(LENGTH):
                z = logits[previous, t] / temperature + prompt
                p = np.exp(z - z.max())
                p /= p.sum()
                if swap:
                    top = np.argsort(p)[-2:]
                    p[top] = p[top][::-1]
                previous = int(rng.choice(VOCAB, p=p))
                row.append(previous)
            rows.append(row)
        out[f"p{prompt}"] = rows
    return out


def _naive(x: list[list[int]], y: list[list[int]], members: np.ndarray) -> np.ndarray:
    """The statistics written out directly, per labelling (no sparse shortcuts)."""
    tokens = np.concatenate([padded(x, LENGTH), padded(y, LENGTH)])
    out = []
    for mask in members:
        xs, ys = tokens[mask], tokens[~mask]
        agreement = 0.0
        prefixes = {tuple(r[:t]) for r in tokens.tolist() for t in range(LENGTH)}
        for prefix in prefixes:
            t = len(prefix)
            nx = [r[t] for r in xs.tolist() if tuple(r[:t]) == prefix]
            ny = [r[t] for r in ys.tolist() if tuple(r[:t]) == prefix]
            if len(nx) < 2 or len(ny) < 2:
                continue

            def same(nexts: list[int]) -> float:
                pairs = len(nexts) * (len(nexts) - 1)
                return sum(nexts.count(v) * (nexts.count(v) - 1) for v in set(nexts)) / pairs

            weight = len(nx) * len(ny) / (len(nx) + len(ny))
            agreement += weight * (same(nx) - same(ny))
        diversity = sum(len(set(xs[:, t])) - len(set(ys[:, t])) for t in range(LENGTH))
        marginals = 0.0
        for t in range(LENGTH):
            for token in set(tokens[:, t]):
                marginals += 0.5 * abs(np.mean(xs[:, t] == token) - np.mean(ys[:, t] == token))
        out.append([agreement, diversity, marginals])
    return np.array(out, dtype=float)


def test_statistics_equal_their_plain_definitions() -> None:
    x, y = draw(7, seed=1)["p0"], draw(6, seed=2, temperature=1.5)["p0"]
    x[0] = x[0][:4]  # a sample that ended early: END after it
    prompt = pooled(x, y, LENGTH)
    members = _labellings(len(x), len(x) + len(y), 5, np.random.default_rng(0))
    got = _statistics(prompt, members)
    assert got.shape == (6, len(STATISTICS)) == (6, 3)
    np.testing.assert_allclose(got, _naive(x, y, members), atol=1e-9)


def test_one_distribution_is_no_alarm_and_identical_samples_prove_nothing_moved() -> None:
    results = [
        two_sample_test(draw(24, seed=s), draw(24, seed=1000 + s), seed=s) for s in range(40)
    ]
    alarms = sum(r is not None and r.p_value <= 0.05 for r in results)
    # 40 draws at alpha 0.05: 2 alarms expected, more than 7 has probability < 0.3%.
    assert alarms <= 7
    same = draw(16, seed=3)
    result = two_sample_test(same, same)
    assert result is not None and result.p_value >= 0.99  # nothing moved: as central as can be


@pytest.mark.parametrize(
    ("shift", "direction"),
    [({"temperature": 1.4}, "more spread"), ({"temperature": 0.7}, "less spread")],
)
def test_hotter_and_colder_sampling_are_found(shift: dict, direction: str) -> None:
    result = two_sample_test(draw(48, seed=11, **shift), draw(48, seed=12))
    assert result is not None
    assert result.p_value <= 0.01
    assert result.direction.startswith(direction)
    assert (result.n, result.prompts, result.tokens) == (48, 3, LENGTH)


def test_mass_moved_between_two_tokens_is_found() -> None:
    result = two_sample_test(draw(48, seed=21, swap=True), draw(48, seed=22))
    assert result is not None and result.p_value <= 0.01


def test_only_prompts_with_samples_on_both_sides_count() -> None:
    x, y = draw(8, prompts=2, seed=1), draw(8, prompts=2, seed=2)
    del y["p1"]
    result = two_sample_test(x, y)
    assert result is not None and result.prompts == 1
    assert two_sample_test({"a": [[1, 2]]}, {"a": [[1, 2]]}) is None  # fewer than 2 a side
