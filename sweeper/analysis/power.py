"""How much a distribution test can see: the smallest shift it detects with 80% power.

After a run (`detectable_shift`): simulated on the baseline's own samples, one half of them
against the other half with a fraction of its tokens replaced, either by tokens the baseline
never drew at that position (too hot, top-p ignored: that fraction is the total variation per
token) or by the position's most common token (too cold: the fraction times the tokens that were
not the mode), the worse of the two directions, through the very test the run uses
(`sweeper.analysis.distribution`). Before a run (`planned_power`) there are no samples: the plan
states it for a reference distribution (`REFERENCE`), from the diversity statistic's exact
moments (fast, and an understatement of the whole test's power).

Pure: token ids in, numbers out (numpy only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sweeper.analysis.distribution import (
    STATISTICS,
    TEST_NAME,
    Samples,
    padded,
    permutation_test,
    pooled,
)

#: Power targeted.
POWER = 0.8
#: Shares of replaced tokens tried, smallest first.
SHIFTS = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5)
#: Replications per shift, and reshuffles per replication, in the simulation.
POWER_REPLICATIONS = 40
POWER_PERMUTATIONS = 199
#: The reference distribution the plan's power is worked out on (no samples exist yet): at
#: every position, with probability 1/2 a confident token (probability 0.9, the rest spread over
#: 9 others), else a Zipf(1.1) choice among 32 tokens; positions independent.
REFERENCE = "per position: half confident (top token 0.9), half Zipf(1.1) over 32 tokens"
#: The basis of a power measured on a run's own baseline samples.
MEASURED = "simulated on this run's AR samples"


@dataclass(frozen=True)
class Power:
    """The smallest shift detected with `POWER` at `n` samples a side, and on what."""

    #: Per-token total variation; None when even the largest tried is not detected.
    shift: float | None
    n: int
    prompts: int
    tokens: int
    alpha: float
    #: What it was worked out on: `MEASURED`, or the plan's reference distribution.
    basis: str

    def text(self) -> str:
        if self.shift is None:
            return (
                f"at N={self.n} a side ({self.prompts} prompts x {self.tokens} tokens) the test "
                f"detects no shift up to {SHIFTS[-1]:.0%} of tokens with {POWER:.0%} power: "
                "too few samples to prove anything"
            )
        return (
            f"detects a shift of {self.shift:.1%} of tokens (total variation per token) with "
            f"{POWER:.0%} power at N={self.n} a side, {self.prompts} prompts x {self.tokens} "
            f"tokens, alpha {self.alpha:g} ({self.basis})"
        )


def _contaminate(
    codes: np.ndarray, delta: float, hot: bool, novel: int, rng: np.random.Generator
) -> np.ndarray:
    """`codes` with a share `delta` of its tokens replaced: by a code never drawn there (`hot`),
    or by the position's most common code (cold)."""
    out = codes.copy()
    hit = rng.random(codes.shape) < delta
    if hot:
        out[hit] = novel + np.arange(int(hit.sum()))
        return out
    out[hit] = np.broadcast_to(_modes(codes), codes.shape)[hit]
    return out


def _modes(codes: np.ndarray) -> np.ndarray:
    """[L] the most common code at each position."""
    return np.array([np.bincount(c - c.min()).argmax() + c.min() for c in codes.T])


def _cold_share(pools: list[np.ndarray]) -> float:
    """The total variation a cold replacement of every token would cause: the mean share of
    tokens that are not their position's most common (a replaced mode changes nothing)."""
    return float(np.mean([np.mean(p != _modes(p)[None, :]) for p in pools]))


def _detects(
    pools: list[np.ndarray], n: int, delta: float, hot: bool, alpha: float,
    rng: np.random.Generator,
) -> bool:  # fmt: skip
    """Whether a `delta` replacement is detected in `POWER` of `POWER_REPLICATIONS`
    replications: per prompt a random N of its pool as Y, another N with the replacement as X.
    Stops as soon as the answer is known (most shifts are clearly in or out)."""
    needed = math.ceil(POWER * POWER_REPLICATIONS)
    detected = missed = 0
    while detected < needed and missed <= POWER_REPLICATIONS - needed:
        prompts = []
        for pool in pools:
            order = rng.permutation(pool.shape[0])
            y, x = pool[order[:n]], pool[order[n : 2 * n]]
            x = _contaminate(x, delta, hot, int(pool.max()) + 1, rng)
            prompts.append(pooled(x.tolist(), y.tolist(), x.shape[1]))
        if permutation_test(prompts, POWER_PERMUTATIONS, rng).p_value <= alpha:
            detected += 1
        else:
            missed += 1
    return detected >= needed


def _smallest(
    pools: list[np.ndarray], n: int, hot: bool, alpha: float, rng: np.random.Generator
) -> float | None:
    """The smallest replacement share of `SHIFTS` detected with `POWER` (bisected: power grows
    with the share), None when the largest is not."""
    low, high = 0, len(SHIFTS) - 1
    if not _detects(pools, n, SHIFTS[high], hot, alpha, rng):
        return None
    while low < high:
        mid = (low + high) // 2
        if _detects(pools, n, SHIFTS[mid], hot, alpha, rng):
            high = mid
        else:
            low = mid + 1
    return SHIFTS[high]


def detectable_shift(
    pools: Sequence[np.ndarray], n: int, alpha: float, *, basis: str, seed: int = 0
) -> Power:
    """The smallest shift (total variation per token) detected with `POWER` at `n` a side in
    both directions, simulated on `pools` (per prompt [samples, positions] token ids, 2n or
    more samples each): the larger of the hot direction's (a share of tokens replaced by ones
    never drawn there: that share is the total variation) and the cold's (replaced by the
    position's mode: the share times the tokens that were not the mode)."""
    usable = [np.asarray(p) for p in pools if len(p) >= 2 * n]
    tokens = max((int(p.shape[1]) for p in usable), default=0)
    if not usable or n < 2:
        return Power(None, n, len(usable), tokens, alpha, basis)
    rng = np.random.default_rng(seed)
    hot = _smallest(usable, n, True, alpha, rng)
    cold = _smallest(usable, n, False, alpha, rng)
    if hot is None or cold is None:
        return Power(None, n, len(usable), tokens, alpha, basis)
    return Power(max(hot, cold * _cold_share(usable)), n, len(usable), tokens, alpha, basis)


def pools_of(samples: Samples) -> list[np.ndarray]:
    """Per prompt, its samples as one [samples, positions] matrix (END after a sample's end)."""
    out = []
    for prompt_id in sorted(samples):
        rows = [list(s) for s in samples[prompt_id]]
        if rows:
            out.append(padded(rows, max(1, max(len(r) for r in rows))))
    return out


def _reference_positions() -> list[np.ndarray]:
    """`REFERENCE`'s two kinds of position, as probability vectors."""
    zipf = 1.0 / np.arange(1, 33) ** 1.1
    confident = np.array([0.9] + [0.1 / 9] * 9)
    return [confident, zipf / zipf.sum()]


def _distinct_moments(probs: np.ndarray, n: int) -> tuple[float, float]:
    """Mean and variance of the number of distinct values among n draws from `probs`."""
    miss = (1.0 - probs) ** n
    mean = float(np.sum(1.0 - miss))
    pair = (1.0 - probs[:, None] - probs[None, :]).clip(min=0.0) ** n
    cov = pair - miss[:, None] * miss[None, :]
    np.fill_diagonal(cov, miss * (1.0 - miss))
    return mean, float(cov.sum())


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _normal_quantile(p: float) -> float:
    low, high = -10.0, 10.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if _normal_cdf(mid) < p else (low, mid)
    return (low + high) / 2


def _expected_power(shift: float, hot: bool, n: int, cells: int, alpha: float) -> float:
    """The diversity statistic's power against a `shift` replacement on `REFERENCE` (half its
    positions of each kind), Bonferroni's critical value over the three statistics (so it
    understates the max-T test's power)."""
    effect = variance = 0.0
    for probs in _reference_positions():
        mean_y, var_y = _distinct_moments(probs, n)
        if hot:  # a share `shift` of draws are new, distinct tokens
            mean_x, var_x = _distinct_moments(probs * (1 - shift), n)
            mean_x += shift * n
            var_x += shift * (1 - shift) * n
        else:
            moved = probs * (1 - shift)
            moved[int(np.argmax(probs))] += shift
            mean_x, var_x = _distinct_moments(moved, n)
        effect += cells / 2 * (mean_x - mean_y)
        variance += cells / 2 * (var_x + var_y)
    critical = _normal_quantile(1 - alpha / (2 * len(STATISTICS)))
    return _normal_cdf(abs(effect) / math.sqrt(variance) - critical) if variance else 0.0


def planned_power(prompts: int, tokens: int, n: int, alpha: float) -> Power:
    """The plan's statement of power before any sample exists: the smallest shift (total
    variation per token, the worse direction) detected with `POWER` on `REFERENCE`, from the
    diversity statistic's exact moments (a normal approximation; fast, and an understatement:
    the report measures the whole test on the run's own AR samples)."""
    cells = prompts * tokens
    basis = f"expected on a reference distribution, {REFERENCE}"
    if n < 2 or cells < 1:
        return Power(None, n, prompts, tokens, alpha, basis)
    confident_tv = np.mean([1 - p.max() for p in _reference_positions()])
    found: list[float] = []
    for hot in (True, False):
        share = next(
            (
                d
                for d in np.linspace(0.005, 1.0, 200)
                if _expected_power(float(d), hot, n, cells, alpha) >= POWER
            ),
            None,
        )
        if share is None:
            return Power(None, n, prompts, tokens, alpha, basis)
        found.append(float(share) if hot else float(share) * float(confident_tv))
    return Power(max(found), n, prompts, tokens, alpha, basis)


def planned_statement(
    prompts: int, tokens: int, n: int, alpha: float, max_shift: float
) -> tuple[str, Power]:
    """The plan's line on the test's power (before any sample exists), and the power."""
    power = planned_power(prompts, tokens, n, alpha)
    line = f"distribution test: {TEST_NAME}, alpha {alpha:g} per config; {power.text()}"
    if power.shift is None or power.shift > max_shift:
        line += (
            f"; a pass needs {max_shift:.0%} or less, so passes would be unproven: raise "
            "determinism.samples"
        )
    else:
        line += "; the report restates it on the run's own AR samples"
    return line, power
