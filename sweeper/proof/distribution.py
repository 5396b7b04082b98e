"""Do two sets of sampled outputs come from one distribution? The test behind `distribution-ok`
and `shifted`, for engines whose sampling is not coupled to the AR baseline's (rejection
sampling: SGLang, vLLM), so their outputs at temperature > 0 can only match AR in distribution.

Data: per prompt, N seeded samples (token-id sequences) from the speculative config (X) and N
from its AR baseline (Y). Each sequence is read as L positions (the longest sample), a finished
sample's later positions holding an END symbol, so a change of length is a change of tokens.

Three statistics, each summed over prompts (every prompt weighs the same), each for a kind of
shift the others see poorly, chosen by their power on planted faults (docs/exactness.md,
"Sampled outputs"):

- `agreement`: at every prefix both sides reach twice or more (a node of the samples' trie), the
  chance that two of X's samples there take the same next token, minus Y's, weighted by how
  many reach it. A sampling fault changes the next token's distribution given the context, and
  the trie compares like with like: hotter sampling or an ignored top-p / top-k lowers it,
  colder or greedy-leaning acceptance raises it. On smollm2-135m at temperature 0.7 it found
  every fault planted there more often than any other statistic tried;
- `diversity`: distinct tokens per position in X minus in Y: tokens AR never samples there
  (the support grew: too hot, a cut-off ignored), also where samples share no prefix, so the
  trie has nothing to compare;
- `marginals`: total variation between X's and Y's per-position token frequencies: mass moved
  between tokens that are equally likely to be agreed on (a swap of two tokens' probabilities,
  an off-by-one token id, leave `agreement` and `diversity` unchanged).

Mean shared prefix length was tried too and dropped: it saw nothing `agreement` missed, and each
statistic more raises the bar for all.

Each is calibrated by permutation: the 2N samples of a prompt are exchangeable when X and Y have
one distribution, so labels are reshuffled within every prompt (B times, seeded) and a
statistic's p-value is its rank among the reshuffles (two-sided but for `marginals`, a distance:
large only). They are combined honestly by Westfall and Young's max-T on the same reshuffles
(`sweeper.stats.maxt`): exact whatever their correlation, with no Bonferroni or Holm loss.

How much it can see (the smallest shift it detects with 80% power) is `sweeper.proof.power`.

Pure: token ids in, numbers out (numpy only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sweeper.stats.maxt import max_t

#: The statistics in the order they are reported.
STATISTICS = ("agreement", "diversity", "marginals")
#: The test's name as records and reports give it.
TEST_NAME = "permutation max-T (agreement, diversity, marginals)"
#: Reshuffles per test; the smallest p-value is 1 / (PERMUTATIONS + 1).
PERMUTATIONS = 999
Samples = Mapping[str, Sequence[Sequence[int]]]


@dataclass(frozen=True)
class DistributionTest:
    """One two-sample test: its combined p-value and what it rests on."""

    p_value: float
    #: Each statistic's own permutation p-value, in `STATISTICS` order.
    p_values: tuple[float, ...]
    #: The observed statistics (agreement signed: X minus Y).
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
        """Which way the samples' spread moved against AR, in words ("" when it did not)."""
        agreement = self.observed[0]
        if agreement < 0:
            return "more spread than AR (hotter, or a cut-off ignored)"
        if agreement > 0:
            return "less spread than AR (colder, or leaning to the draft)"
        return ""


END = -1


@dataclass
class Pooled:
    """One prompt's X and Y samples (X rows first) in the shapes the statistics read. Codes
    and trie nodes held by one sample only move with that sample, so they enter as per-sample
    counts (`*_single`); the matrices hold the shared ones only (a fraction of them)."""

    n_x: int
    #: [M, S] 1.0 where a sample holds a shared (position, token) code; [M] its singleton codes.
    codes: np.ndarray
    codes_single: np.ndarray
    #: [M, V] 1.0 where a sample passes a trie node two or more samples reach (a prefix they
    #: share); [M, E] where it takes an edge two or more take (a next token they share there),
    #: edges grouped by node: group k's edges start at `starts[k]` and leave node `groups[k]`.
    nodes: np.ndarray
    edges: np.ndarray
    groups: np.ndarray
    starts: np.ndarray
    tokens: int

    @property
    def m(self) -> int:
        return int(self.nodes.shape[0])


def padded(samples: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """[samples, length] token ids, END after a sample's end."""
    out = np.full((len(samples), length), END, dtype=np.int64)
    for row, ids in enumerate(samples):
        ids = list(ids)[:length]
        out[row, : len(ids)] = ids
    return out


def _columns(ids: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """[M, len(keep)] 1.0 where a sample holds one of the `keep` ids (sorted; any position)."""
    out = np.zeros((ids.shape[0], len(keep)))
    if not len(keep):
        return out
    at = np.searchsorted(keep, ids).clip(max=len(keep) - 1)
    held = keep[at] == ids
    rows = np.broadcast_to(np.arange(ids.shape[0])[:, None], ids.shape)
    out[rows[held], at[held]] = 1.0
    return out


def pooled(x: Sequence[Sequence[int]], y: Sequence[Sequence[int]], length: int) -> Pooled:
    """One prompt's X and Y samples pooled (see `Pooled`)."""
    tokens = np.concatenate([padded(x, length), padded(y, length)])
    m = tokens.shape[0]
    # Per-position codes: (position, token) -> one id.
    codes = np.empty_like(tokens)
    offset = 0
    for t in range(length):
        _, inverse = np.unique(tokens[:, t], return_inverse=True)
        codes[:, t] = inverse + offset
        offset += int(inverse.max()) + 1
    # Trie nodes: a prefix -> one id, depth by depth (node[:, t] holds the first t tokens).
    node = np.zeros((m, length + 1), dtype=np.int64)
    count = 1
    for t in range(length):
        pairs = np.stack([node[:, t], tokens[:, t]], axis=1)
        _, inverse = np.unique(pairs, axis=0, return_inverse=True)
        node[:, t + 1] = inverse.reshape(-1) + count
        count += int(inverse.max()) + 1
    seen = np.bincount(codes.ravel())
    shared_codes = np.flatnonzero(seen >= 2)
    visits = np.bincount(node.ravel(), minlength=count)
    parent = np.zeros(count, dtype=np.int64)
    parent[node[:, 1:]] = node[:, :-1]
    # Nodes two or more samples pass before the last position, and the next tokens two or more
    # take out of them (one taken once never makes a pair), grouped by node.
    shared_nodes = np.unique(node[:, :-1][visits[node[:, :-1]] >= 2])
    children = np.unique(node[:, 1:][visits[node[:, 1:]] >= 2])
    under = np.searchsorted(shared_nodes, parent[children])
    order = np.argsort(under, kind="stable")
    groups, starts = np.unique(under[order], return_index=True)
    return Pooled(
        n_x=len(x),
        codes=_columns(codes, shared_codes),
        codes_single=(seen[codes] == 1).sum(axis=1).astype(np.float64),
        nodes=_columns(node[:, :-1], shared_nodes),
        edges=_columns(node[:, 1:], children)[:, order],
        groups=groups,
        starts=starts,
        tokens=length,
    )


def _statistics(prompt: Pooled, members: np.ndarray) -> np.ndarray:
    """[B, 3] statistics (`STATISTICS`) for B labellings; `members[b]` is the [M] bool mask of
    X in labelling b: agreement and diversity, X's minus Y's, and marginals, a distance."""
    n_x = prompt.n_x
    n_y = prompt.m - n_x
    g = members.astype(np.float64)
    h = 1.0 - g
    # agreement: at every shared prefix both sides reach twice or more, the chance that two of
    # X's samples there take the same next token, minus Y's, weighted by how many reach it.
    at_x, at_y = g @ prompt.nodes, h @ prompt.nodes
    agreement = np.zeros(len(g))
    if prompt.starts.size:
        took_x, took_y = g @ prompt.edges, h @ prompt.edges
        same_x, same_y = np.zeros_like(at_x), np.zeros_like(at_y)
        same_x[:, prompt.groups] = np.add.reduceat(took_x * (took_x - 1), prompt.starts, axis=1)
        same_y[:, prompt.groups] = np.add.reduceat(took_y * (took_y - 1), prompt.starts, axis=1)
        both = (at_x > 1) & (at_y > 1)
        weight = np.where(both, at_x * at_y / np.maximum(at_x + at_y, 1.0), 0.0)
        rate_x = same_x / np.maximum(at_x * (at_x - 1), 1.0)
        rate_y = same_y / np.maximum(at_y * (at_y - 1), 1.0)
        agreement = (weight * (rate_x - rate_y)).sum(axis=1)
    # diversity and marginals per position; a code one sample holds counts for its side alone.
    count_x, count_y = g @ prompt.codes, h @ prompt.codes
    single_x, single_y = g @ prompt.codes_single, h @ prompt.codes_single
    diversity = (count_x > 0).sum(axis=1) - (count_y > 0).sum(axis=1) + single_x - single_y
    gap = np.abs(count_x / n_x - count_y / n_y).sum(axis=1)
    marginals = 0.5 * (gap + single_x / n_x + single_y / n_y)
    return np.stack([agreement, diversity, marginals], axis=1).astype(np.float64)


def _labellings(n_x: int, m: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """[count + 1, m] masks: row 0 the observed labels (X first), then random reshuffles."""
    observed = np.zeros(m, dtype=bool)
    observed[:n_x] = True
    keys = rng.random((count, m))
    shuffled = np.argsort(keys, axis=1)[:, :n_x]
    masks = np.zeros((count, m), dtype=bool)
    np.put_along_axis(masks, shuffled, True, axis=1)
    return np.concatenate([observed[None, :], masks])


#: Which statistics are extreme both ways (a difference); `marginals` is a distance: only large.
TWO_SIDED = (True, True, False)


def _prepared(x: Samples, y: Samples) -> list[Pooled]:
    prompts = []
    for prompt_id in sorted(set(x) & set(y)):
        xs, ys = [list(s) for s in x[prompt_id]], [list(s) for s in y[prompt_id]]
        if len(xs) < 2 or len(ys) < 2:
            continue
        length = max(1, max(len(s) for s in (*xs, *ys)))
        prompts.append(pooled(xs, ys, length))
    return prompts


def two_sample_test(
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
    combined, per = max_t(stats, TWO_SIDED)
    return DistributionTest(
        p_value=combined,
        p_values=per,
        observed=tuple(float(v) for v in stats[0]),
        n=min(min(p.n_x, p.m - p.n_x) for p in prompts),
        prompts=len(prompts),
        tokens=max(p.tokens for p in prompts),
        permutations=permutations,
    )
