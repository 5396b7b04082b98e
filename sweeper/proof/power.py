"""How much a distribution test can see: the smallest shift it detects with 80% power.

The shift: a share of tokens moved onto tokens the baseline never draws at that position, what
a raised temperature or an ignored top-p / top-k does to a distribution (that share is the
total variation per token). After a run (`detectable_shift`) it is simulated on the baseline's
own samples: one half of them against the other half with that share of its tokens moved,
through the very test the run uses (`sweeper.proof.distribution`). Before a run
(`planned_power`) there are no samples: the plan states it for a reference distribution
(`REFERENCE`), from the diversity statistic's exact moments (fast, and an understatement of the
whole test's power).

Colder sampling (mass moved onto the likeliest token) is not this shift: how often the test
sees it was measured on planted faults and is stated in docs/exactness.md, not per run.

Pure: token ids in, numbers out (numpy only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sweeper.proof.distribution import (
    STATISTICS,
    TEST_NAME,
    Samples,
    padded,
    permutation_test,
    pooled,
)

_NORMAL = NormalDist()
#: Power targeted.
POWER = 0.8
#: Shares of replaced tokens tried, smallest first.
SHIFTS = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5)
#: Replications per shift, and reshuffles per replication, in the simulation.
POWER_REPLICATIONS = 30
POWER_PERMUTATIONS = 99
#: The reference distribution the plan's power is worked out on (no samples exist yet): half
#: the positions confident (one token at 0.9, the rest over 9 others), half a Zipf(1) choice
#: among 256 tokens; positions independent. On smollm2-135m at temperature 0.7 (4 chat
#: prompts, 24 tokens) it gives 4.5% at N = 48 and 2.5% at N = 96 where the simulation on the
#: model's own samples measured 5% and 2%.
REFERENCE = "per position: half confident (top token 0.9), half Zipf(1) over 256 tokens"
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
            f"detects {self.shift:.1%} of tokens moved onto tokens AR never samples there "
            f"(total variation {self.shift:.1%} per token) with {POWER:.0%} power at N={self.n} "
            f"a side, {self.prompts} prompts x {self.tokens} tokens, alpha {self.alpha:g} "
            f"({self.basis})"
        )


def _moved(codes: np.ndarray, share: float, novel: int, rng: np.random.Generator) -> np.ndarray:
    """`codes` with a `share` of its tokens replaced by tokens never drawn there (`novel` up)."""
    out = codes.copy()
    hit = rng.random(codes.shape) < share
    out[hit] = novel + np.arange(int(hit.sum()))
    return out


def _detects(
    pools: list[np.ndarray], n: int, delta: float, alpha: float, rng: np.random.Generator
) -> bool:
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
            x = _moved(x, delta, int(pool.max()) + 1, rng)
            prompts.append(pooled(x.tolist(), y.tolist(), x.shape[1]))
        reshuffles = max(POWER_PERMUTATIONS, math.ceil(2 / alpha) - 1)  # room below alpha
        if permutation_test(prompts, reshuffles, rng).p_value <= alpha:
            detected += 1
        else:
            missed += 1
    return detected >= needed


def _smallest(
    pools: list[np.ndarray], n: int, alpha: float, rng: np.random.Generator
) -> float | None:
    """The smallest share of `SHIFTS` detected with `POWER` (bisected: power grows with the
    share), None when the largest is not."""
    low, high = 0, len(SHIFTS) - 1
    if not _detects(pools, n, SHIFTS[high], alpha, rng):
        return None
    while low < high:
        mid = (low + high) // 2
        if _detects(pools, n, SHIFTS[mid], alpha, rng):
            high = mid
        else:
            low = mid + 1
    return SHIFTS[high]


def detectable_shift(
    pools: Sequence[np.ndarray], n: int, alpha: float, *, basis: str, seed: int = 0
) -> Power:
    """The smallest share of tokens moved onto tokens the baseline never drew there (what a
    raised temperature or an ignored top-p / top-k does: that share is the total variation per
    token) that the test detects with `POWER` at `n` a side, simulated on `pools` (per prompt
    [samples, positions] token ids, 2n or more samples each)."""
    usable = [np.asarray(p) for p in pools if len(p) >= 2 * n]
    tokens = max((int(p.shape[1]) for p in usable), default=0)
    if not usable or n < 2:
        return Power(None, n, len(usable), tokens, alpha, basis)
    found = _smallest(usable, n, alpha, np.random.default_rng(seed))
    return Power(found, n, len(usable), tokens, alpha, basis)


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
    zipf = 1.0 / np.arange(1, 257)
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


def _expected_power(share: float, n: int, cells: int, alpha: float) -> float:
    """The diversity statistic's power against a `share` of tokens moved onto new ones on
    `REFERENCE` (half its positions of each kind), at Bonferroni's critical value over the
    statistics (so it understates the max-T test's power)."""
    effect = variance = 0.0
    for probs in _reference_positions():
        mean_y, var_y = _distinct_moments(probs, n)
        mean_x, var_x = _distinct_moments(probs * (1 - share), n)
        mean_x += share * n  # each moved draw is a new distinct token
        var_x += share * (1 - share) * n
        effect += cells / 2 * (mean_x - mean_y)
        variance += cells / 2 * (var_x + var_y)
    critical = _NORMAL.inv_cdf(1 - alpha / (2 * len(STATISTICS)))
    return _NORMAL.cdf(abs(effect) / math.sqrt(variance) - critical) if variance else 0.0


def planned_power(prompts: int, tokens: int, n: int, alpha: float) -> Power:
    """The plan's statement of power before any sample exists: the smallest share of tokens
    moved onto new ones detected with `POWER` on `REFERENCE`, from the diversity statistic's
    exact moments (a normal approximation: fast, and an understatement; the report measures
    the whole test on the run's own AR samples)."""
    cells = prompts * tokens
    basis = f"expected on a reference distribution, {REFERENCE}"
    if n < 2 or cells < 1:
        return Power(None, n, prompts, tokens, alpha, basis)
    grid = np.linspace(0.005, 1.0, 200)
    share = next(
        (float(d) for d in grid if _expected_power(float(d), n, cells, alpha) >= POWER), None
    )
    return Power(share, n, prompts, tokens, alpha, basis)


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
