"""Target choice per node: argmax at temperature 0, otherwise an inverse-CDF sample; the processed
distribution it samples from (`processed_probs`, in steps a scorer reuses: `ddtree_runtime.score`):
temperature, then min-p, top-k and top-p, each on what the one before left (vLLM's order).

The uniform for a sample is a fixed function of (request seed, absolute token position), so every
tree node predicting position p uses the same u autoregressive decoding uses at p. DDTree sampling
therefore reproduces AR sampling token for token for the same seed (lossless by construction) and
does not depend on which other requests share the batch.
"""

from __future__ import annotations

import torch

_MASK64 = (1 << 64) - 1


def _splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def uniform(seed: int, position: int) -> float:
    """A hash of (seed, position) mapped to [0, 1) with 53 bits."""
    z = _splitmix64(_splitmix64(seed & _MASK64) ^ (position & _MASK64))
    return (z >> 11) / float(1 << 53)


def choice_seed(seed: int, index: int) -> int:
    """The seed of choice `index` of a request for n samples at `seed`: the seed itself for
    choice 0 (so n = 1 is unchanged), else a 63-bit hash of (seed, index), so choices of
    requests at neighbouring seeds never share their uniforms."""
    if index == 0:
        return seed
    return _splitmix64(_splitmix64(seed & _MASK64) ^ (index << 32)) >> 1


def tempered(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Logits divided by the temperature, in float64 (the first step of `processed_probs`)."""
    return logits.to(torch.float64) / temperature


def min_p_cut(scaled: torch.Tensor, min_p: float) -> torch.Tensor:
    """`scaled` (tempered logits) with -inf where a token's tempered probability is below
    `min_p` times the top token's (0: unchanged). The ratio is exp of the logit difference, the
    weight relative to the top token the judge reads min-p by
    (`sweeper.proof.scored.processed`); the top token and its ties are always kept, so the argmax
    never moves."""
    if min_p <= 0.0:
        return scaled
    top = scaled.max(dim=-1, keepdim=True).values
    return scaled.masked_fill(torch.exp(scaled - top) < min_p, float("-inf"))


def top_k_cut(scaled: torch.Tensor, top_k: int) -> torch.Tensor:
    """`scaled` with -inf below its k-th largest value (0 or k >= vocab: unchanged): ties at
    the k-th value are all kept."""
    vocab = scaled.shape[-1]
    if 0 < top_k < vocab:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        return scaled.masked_fill(scaled < kth, float("-inf"))
    return scaled


def mass_above(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token, the probability mass strictly above it in descending order (ties: the lower
    id first, the order of a stable sort), and that order."""
    sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    before = sorted_p.cumsum(dim=-1) - sorted_p
    return torch.zeros_like(before).scatter(-1, order, before), order


def mass_above_token(probs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Per row, the mass strictly above token `index[i]` in `mass_above`'s order (descending
    probability, ties: the lower id first): the quantity `mass_above` gives that token, without
    sorting the row, for a caller that needs one token a row (scoring: a sort of the vocabulary
    a position was most of its cost). Summed in id order, so it may differ from `mass_above`'s
    running sum in the last bits."""
    own = probs.gather(-1, index)
    ids = torch.arange(probs.shape[-1], device=probs.device)[None, :]
    above = (probs > own) | ((probs == own) & (ids < index))
    return probs.masked_fill(~above, 0.0).sum(dim=-1)


def top_p_dropped(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The tokens top-p removes: those with at least `top_p` of the mass strictly above them,
    which keeps the smallest prefix reaching top_p (none below 1)."""
    if top_p >= 1.0:
        return torch.zeros_like(probs, dtype=torch.bool)
    return mass_above(probs)[0] >= top_p


def processed_probs(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float
) -> torch.Tensor:
    """Probabilities after temperature, min-p, top-k and top-p (over the last dim), in float64;
    each cut acts on the distribution the one before left, renormalised."""
    cut = top_k_cut(min_p_cut(tempered(logits, temperature), min_p), top_k)
    probs = torch.softmax(cut, dim=-1)
    if top_p < 1.0:
        probs = probs.masked_fill(top_p_dropped(probs, top_p), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample_with_uniform(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse CDF in token-id order: the first id whose cumulative mass exceeds u."""
    cdf = probs.cumsum(dim=-1)
    total = cdf[..., -1:]
    idx = torch.searchsorted(cdf, (u[..., None] * total).contiguous(), right=True)
    idx = idx.clamp(max=probs.shape[-1] - 1)[..., 0]
    # Never land on a zero-probability id (float edge at the top of the cdf).
    zero = probs.gather(-1, idx[..., None])[..., 0] <= 0
    if bool(zero.any()):
        last_nonzero = (probs > 0).cumsum(dim=-1).argmax(dim=-1)
        idx = torch.where(zero, last_nonzero, idx)
    return idx


def choose(
    logits: torch.Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    u: torch.Tensor | None,
) -> torch.Tensor:
    """Target choice for rows of logits [..., V]; u (same leading shape) is needed when T > 0.
    At T = 0 the cuts are moot: each keeps the argmax."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    assert u is not None
    return sample_with_uniform(processed_probs(logits, temperature, top_k, top_p, min_p), u)


def sample_margins(probs: torch.Tensor, u: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Per row of `probs` [..., V]: how far u lies inside the token's CDF interval, signed.

    The interval is [F(token-1), F(token)) in token-id order, F normalised by the row total as
    ``sample_with_uniform`` does; the margin is min(u - F_lo, F_hi - u): >= 0 for the token u
    selects (0 at an edge), and minus u's distance to the interval for any other. It is how far
    the CDF would have to move (numerics: another kernel order, another batch shape) for u to
    select the token: a divergence from AR at a position whose AR margin is below a small
    threshold is a sampled near-tie, like a greedy near-tie's top-1 minus top-2 logprob, unless
    the token emitted there lies farther outside u's draw (a token a lossless coupled sampler
    never emits: relaxed acceptance, a sampling bug).
    """
    probs = probs.to(torch.float64)
    cdf = probs.cumsum(dim=-1)
    total = cdf[..., -1]
    index = tokens.to(torch.long)[..., None]
    hi = cdf.gather(-1, index)[..., 0]
    # cdf[token-1], not hi - p: the same partial sums searchsorted compared u against.
    lo = torch.where(index[..., 0] > 0, cdf.gather(-1, (index - 1).clamp(min=0))[..., 0], 0.0)
    u = u.to(torch.float64)
    return torch.minimum(u - lo / total, hi / total - u)
