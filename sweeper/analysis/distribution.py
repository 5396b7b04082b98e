"""Do two sets of sampled outputs come from one distribution? The test behind `distribution-ok`
and `shifted`, for engines whose sampling is not coupled to the AR baseline's (rejection
sampling: SGLang, vLLM), so their outputs at temperature > 0 can only match AR in distribution.

Data: per prompt, N seeded samples (token-id sequences) from the speculative config (X) and N
from its AR baseline (Y). Each sequence is read as L positions (the longest sample), a finished
sample's later positions holding an END symbol, so a change of length is a change of tokens.

Three statistics, each summed over positions and prompts (every prompt and position weighs
the same), chosen for the faults that matter:

- `diversity`: distinct tokens per position in X minus in Y. Too hot, top-p / top-k ignored (a
  token the target never samples there) and greedy-leaning acceptance (too cold) move it first;
  measured here it saw a 1.6x hotter draft sampling that per-position marginal tests missed;
- `marginals`: total variation between X's and Y's per-position token frequencies: a shift of
  mass between tokens that keeps their number (a biased acceptance rule favouring the draft's
  token);
- `prefix`: mean longest common prefix between two samples of X minus of Y: how soon samples
  part, a sequence-level view of the same diversity.

Each is calibrated by permutation: the 2N samples of a prompt are exchangeable when X and Y have
one distribution, so labels are reshuffled within every prompt (B times, seeded) and a
statistic's p-value is its rank among the reshuffles (two-sided). The three
are combined honestly by Westfall and Young's max-T, calibrated on the same reshuffles: each is
standardised by its reshuffles' mean and spread, and the largest of the three |z| is ranked
against the largest of every reshuffle's, so the combined p-value is exact whatever their
correlation, with no Bonferroni or Holm loss.

How much it can see (the smallest shift it detects with 80% power) is `sweeper.analysis.power`.

Pure: token ids in, numbers out (numpy only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: The statistics in the order they are reported.
STATISTICS = ("diversity", "marginals", "prefix")
#: The test's name as records and reports give it.
TEST_NAME = "permutation max-T (diversity, marginals, prefix)"
#: Reshuffles per test; the smallest p-value is 1 / (PERMUTATIONS + 1).
PERMUTATIONS = 999
Samples = Mapping[str, Sequence[Sequence[int]]]


@dataclass(frozen=True)
class DistributionTest:
    """One two-sample test: its combined p-value and what it rests on."""

    p_value: float
    #: Each statistic's own permutation p-value, in `STATISTICS` order.
    p_values: tuple[float, ...]
    #: The observed statistics (diversity and prefix signed: X minus Y).
    observed: tuple[float, ...]
    #: Samples per side per prompt (the smaller side's, when they differ), prompts, positions.
    n: int
    prompts: int
    tokens: int
    permutations: int
    test: str = TEST_NAME

    def shifted(self, alpha: float) -> bool:
        return self.p_value <= alpha

    @property
    def direction(self) -> str:
        """Which way diversity moved, in words ("" when it did not)."""
        diversity = self.observed[0]
        if diversity > 0:
            return "more diverse than AR (hotter, or a cut-off ignored)"
        if diversity < 0:
            return "less diverse than AR (colder, or leaning to the draft)"
        return ""


@dataclass
class Pooled:
    """One prompt's pooled samples as codes: X rows first, then Y rows."""

    codes: np.ndarray  # [M, L] int: a token's code at its position (0 .. n_codes - 1)
    n_codes: int
    n_x: int
    lcp: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # [M, M] common prefix
    _onehot: np.ndarray | None = None

    @property
    def m(self) -> int:
        return int(self.codes.shape[0])

    @property
    def onehot(self) -> np.ndarray:
        """[M, n_codes] 1.0 where a sample holds a code (one per position)."""
        if self._onehot is None:
            self._onehot = np.zeros((self.m, self.n_codes))
            np.put_along_axis(self._onehot, self.codes, 1.0, axis=1)
        return self._onehot


END = -1


def padded(samples: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """[samples, length] token ids, END after a sample's end."""
    out = np.full((len(samples), length), END, dtype=np.int64)
    for row, ids in enumerate(samples):
        ids = list(ids)[:length]
        out[row, : len(ids)] = ids
    return out


def pooled(x: Sequence[Sequence[int]], y: Sequence[Sequence[int]], length: int) -> Pooled:
    """One prompt's X and Y samples as codes (per position), with their common prefixes."""
    tokens = np.concatenate([padded(x, length), padded(y, length)])
    codes = np.empty_like(tokens)
    offset = 0
    for t in range(length):
        _, inverse = np.unique(tokens[:, t], return_inverse=True)
        codes[:, t] = inverse + offset
        offset += int(inverse.max()) + 1 if len(inverse) else 0
    same = tokens[:, None, :] == tokens[None, :, :]  # [M, M, L]
    lcp = np.cumprod(same, axis=2).sum(axis=2).astype(np.float64)
    return Pooled(codes, offset, len(x), lcp)


def _statistics(prompt: Pooled, members: np.ndarray) -> np.ndarray:
    """[B, 3] statistics for B labellings; `members[b]` is the [M] bool mask of X in labelling b."""
    n_x = prompt.n_x
    n_y = prompt.m - n_x
    g = members.astype(np.float64)
    count_x = g @ prompt.onehot
    count_y = prompt.onehot.sum(axis=0)[None, :] - count_x
    diversity = (count_x > 0).sum(axis=1) - (count_y > 0).sum(axis=1)
    marginals = 0.5 * np.abs(count_x / n_x - count_y / n_y).sum(axis=1)
    h = 1.0 - g
    within_x = ((g @ prompt.lcp) * g).sum(axis=1)
    within_y = ((h @ prompt.lcp) * h).sum(axis=1)
    diag = np.diag(prompt.lcp)
    within_x = (within_x - g @ diag) / max(n_x * (n_x - 1), 1)
    within_y = (within_y - h @ diag) / max(n_y * (n_y - 1), 1)
    return np.stack([diversity, marginals, within_x - within_y], axis=1).astype(np.float64)


def _labellings(n_x: int, m: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """[count + 1, m] masks: row 0 the observed labels (X first), then random reshuffles."""
    observed = np.zeros(m, dtype=bool)
    observed[:n_x] = True
    keys = rng.random((count, m))
    shuffled = np.argsort(keys, axis=1)[:, :n_x]
    masks = np.zeros((count, m), dtype=bool)
    np.put_along_axis(masks, shuffled, True, axis=1)
    return np.concatenate([observed[None, :], masks])


def _rank_p(values: np.ndarray) -> np.ndarray:
    """Per row, the share of rows (itself included) at least as extreme: [B+1] p-values."""
    order = np.sort(values)
    at_least = len(values) - np.searchsorted(order, values, side="left")
    return at_least / len(values)


def _combine(stats: np.ndarray) -> tuple[float, tuple[float, ...]]:
    """Westfall and Young's max-T over the reshuffles (row 0 observed): each statistic is
    standardised by its reshuffles' mean and spread, and the largest |z| of the observed row is
    ranked against the largest of every reshuffle. Returns the combined and per-statistic
    p-values."""
    centred = stats - stats[1:].mean(axis=0)
    spread = stats[1:].std(axis=0)
    z = np.abs(centred) / np.where(spread > 0, spread, 1.0)
    z[:, spread <= 0] = 0.0  # a statistic no reshuffle moves says nothing
    per = tuple(float(np.mean(z[:, k] >= z[0, k] - 1e-12)) for k in range(stats.shape[1]))
    largest = z.max(axis=1)
    return float(np.mean(largest >= largest[0] - 1e-12)), per


def _prepared(x: Samples, y: Samples) -> list[Pooled]:
    prompts = []
    for prompt_id in sorted(set(x) & set(y)):
        xs, ys = [list(s) for s in x[prompt_id]], [list(s) for s in y[prompt_id]]
        if len(xs) < 2 or len(ys) < 2:
            continue
        length = max(1, max(len(s) for s in (*xs, *ys)))
        prompts.append(pooled(xs, ys, length))
    return prompts


def test_samples(
    x: Samples, y: Samples, *, permutations: int = PERMUTATIONS, seed: int = 0
) -> DistributionTest | None:
    """X against Y, prompts they share with 2+ samples each (None when there is none)."""
    prompts = _prepared(x, y)
    if not prompts:
        return None
    return permutation_test(prompts, permutations, np.random.default_rng(seed))


def permutation_test(
    prompts: list[Pooled], permutations: int, rng: np.random.Generator
) -> DistributionTest:
    """The test over prepared prompts, `permutations` reshuffles drawn from `rng`."""
    stats = np.zeros((permutations + 1, len(STATISTICS)))
    for prompt in prompts:
        stats += _statistics(prompt, _labellings(prompt.n_x, prompt.m, permutations, rng))
    combined, per = _combine(stats)
    return DistributionTest(
        p_value=combined,
        p_values=per,
        observed=tuple(float(v) for v in stats[0]),
        n=min(min(p.n_x, p.m - p.n_x) for p in prompts),
        prompts=len(prompts),
        tokens=max(int(p.codes.shape[1]) for p in prompts),
        permutations=permutations,
    )
