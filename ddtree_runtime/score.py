"""Scoring a sampled continuation with the target's own prefill: per token, where it fell in the
distribution this runtime samples from.

One plain Hugging Face forward over prompt + continuation (no slot cache, no tree mask, no draft,
no verify: transformers' own causal attention, as `reference.py`), then per continuation token,
under the request's logits processors (`algo.processors`: logit bias, then penalties counted over
the prompt and the continuation's tokens before this one, the engine's own code over a chain) and
then its temperature / min-p / top-k / top-p as `algo.sampling.processed_probs` applies them (the
one definition the sampler and sample margins use). Each field is on one scale: `logprob`,
`rank`, `logsumexp` and `top` on the raw logits (no processor, temperature 1); `p`, `above`,
`gap` and `boundary` on the processed ones (after the logit processors):

- `logprob`: the raw log-softmax of the logits (temperature 1, untruncated, no processors), and
  `rank`, its 1-based rank by raw logprob (ties: the lower id first);
- `logsumexp`: the log-sum-exp of the position's raw logits, so a raw logit is its logprob plus
  this: its sign is what a repetition penalty scales by (a positive logit divided, any other
  multiplied), which a judge rebuilding the penalty from the raw logprobs needs;
- `p`: its processed probability (0 when truncation removed it), and `above`, the processed mass
  strictly above it (processed probability descending, ties by id ascending): a lossless sampler
  draws tokens whose randomized PIT `above + V * p` is uniform;
- `gap` (only where p is 0): how far outside the truncation it fell, in tempered probability mass
  (temperature applied, untruncated), the first cut that removed it deciding: below min-p,
  min_p times the top token's tempered probability minus its own; below top-k, the k-th token's
  tempered probability minus its own; outside the top-p nucleus, the mass above it beyond top_p,
  in tempered mass. A token a hair outside is a numerical near tie, never a proof;
- `boundary` (only where p is 0): the logprob of the boundary it fell outside, on the processed
  logits' log-softmax: below min-p, its threshold, the top token's logprob + T ln(min_p) (a
  tempered ratio of min_p to the top); otherwise the least likely token the processed
  distribution keeps (below top-k, the k-th token; outside the top-p nucleus, the nucleus's
  last). Without processors that is the raw scale, the token's `logprob`'s, and the judge holds
  a near tie to their distance in nats, the scale this runtime's numerics move (a tempered-mass
  gap makes every violation in the tail look small); under processors the two are on different
  scales, so the judge weighs a claimed removal by its own rebuild (`sweeper.proof.scored.rebuilt`);
- a token the request's grammar forbids there (`response_format` / `regex`, masked first, as
  the sampler does) has p 0 and neither `gap` nor `boundary`: no numerics moves a grammar, so
  it is never a near tie;
- `top` (as many as asked): the position's best tokens as [id, raw logprob], best first (ties:
  the lower id), whatever token was drawn there. The judge's test for temperature weighs each
  position by how much temperature moves it, which it reads from these
  (`sweeper.proof.scored.processed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ddtree_runtime.algo.processors import History, Processors, chain_paths, processed_logits
from ddtree_runtime.algo.sampling import (
    mass_above_token,
    min_p_cut,
    processed_probs,
    tempered,
    top_k_cut,
)

#: The order this runtime applies its sampling parameters in (`processed_probs`), after the logit
#: processors (`algo.processors.LOGIT_ORDER`): each step on the distribution the previous one
#: left, renormalised.
ORDER = ("temperature", "min_p", "top_k", "top_p")


@dataclass(frozen=True)
class PositionScore:
    """One continuation token's score (see the module docstring)."""

    token: int
    logprob: float
    logsumexp: float
    rank: int
    p: float
    above: float
    gap: float | None
    boundary: float | None
    top: tuple[tuple[int, float], ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "logprob": self.logprob,
            "logsumexp": self.logsumexp,
            "rank": self.rank,
            "p": self.p,
            "above": self.above,
            "gap": self.gap,
            "boundary": self.boundary,
            "top": [[token, logprob] for token, logprob in self.top],
        }


@torch.inference_mode()
def continuation_logits(model: Any, prompt: list[int], continuation: list[int]) -> torch.Tensor:
    """Logits [len(continuation), V] of the target at each continuation token's position, from
    one forward over prompt + continuation[:-1]."""
    device = next(model.parameters()).device
    ids = torch.tensor([[*prompt, *continuation[:-1]]], device=device)
    out = model(input_ids=ids, use_cache=False, logits_to_keep=len(continuation))
    return out.logits[0].to(torch.float64)


def score_rows(
    logits: torch.Tensor,
    tokens: list[int],
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    top_logprobs: int,
    processed: torch.Tensor | None = None,
) -> list[PositionScore]:
    """Scores of `tokens[i]` under row i of `logits` [n, V], each with its row's best
    `top_logprobs` tokens (module docstring); p, above, gap and boundary from `processed`, the
    logits after the request's processors, grammar mask first (None: it has none)."""
    index = torch.tensor(tokens, dtype=torch.long, device=logits.device)[:, None]
    raw = torch.log_softmax(logits.to(torch.float64), dim=-1)
    lse = torch.logsumexp(logits.to(torch.float64), dim=-1)
    own_raw = raw.gather(-1, index)
    ids = torch.arange(raw.shape[-1], device=raw.device)[None, :]
    rank = 1 + (raw > own_raw).sum(-1) + ((raw == own_raw) & (ids < index)).sum(-1)
    base = logits if processed is None else processed
    # -inf before truncation only where a grammar forbids the token (no processor makes one).
    forbidden = torch.isinf(base.gather(-1, index)[:, 0]).tolist()
    probs = processed_probs(base, temperature, top_k, top_p, min_p)
    above = mass_above_token(probs, index)
    p = probs.gather(-1, index)[:, 0]
    out = []
    gaps = truncation_gaps(base, index, temperature, top_k, top_p, min_p)
    below = below_min_p(base, index, temperature, min_p)
    logprobs = raw if processed is None else torch.log_softmax(base.to(torch.float64), dim=-1)
    bounds = boundaries(logprobs, probs, below, temperature, min_p)
    best = _best(raw, top_logprobs)
    for j, token in enumerate(tokens):
        dropped = bool(p[j] <= 0)
        out.append(
            PositionScore(
                token=int(token),
                logprob=float(own_raw[j, 0]),
                logsumexp=float(lse[j]),
                rank=int(rank[j]),
                p=float(p[j]),
                above=float(above[j]) if not dropped else float(probs[j].sum()),
                gap=float(gaps[j]) if dropped and not forbidden[j] else None,
                boundary=float(bounds[j]) if dropped and not forbidden[j] else None,
                top=best[j],
            )
        )
    return out


def _best(raw: torch.Tensor, k: int) -> list[tuple[tuple[int, float], ...]]:
    """Per row of raw logprobs, its best `k` as (id, logprob), best first, ties by the lower
    id (the order the rank uses, a stable sort of the ids by descending logprob): the k-th
    value found by `topk`, then only the tokens at or above it ordered, not the vocabulary."""
    if k <= 0:
        return [() for _ in range(raw.shape[0])]
    cut = torch.topk(raw, min(k, raw.shape[-1]), dim=-1).values[:, -1:]
    out = []
    for row, at_least in zip(raw, raw >= cut, strict=True):
        ids = at_least.nonzero()[:, 0]
        chosen = sorted(zip(ids.tolist(), row[ids].tolist(), strict=True), key=_best_first)
        out.append(tuple(chosen[:k]))
    return out


def _best_first(pair: tuple[int, float]) -> tuple[float, int]:
    token, logprob = pair
    return -logprob, token


def below_min_p(
    logits: torch.Tensor, index: torch.Tensor, temperature: float, min_p: float
) -> torch.Tensor:
    """Per row, whether min-p removes the token `index[i]` (the sampler's own cut)."""
    return torch.isinf(min_p_cut(tempered(logits, temperature), min_p).gather(-1, index)[:, 0])


def boundaries(
    raw: torch.Tensor, probs: torch.Tensor, below: torch.Tensor, temperature: float, min_p: float
) -> torch.Tensor:
    """Per row, the logprob (in `raw`: the processed logits' log-softmax) of the boundary a
    dropped token fell outside: min-p's threshold (the top logprob + T ln(min_p)) where min-p
    removed it (`below`, from `below_min_p`), else the least likely token `probs` keeps (every
    step keeps the likeliest tokens, so the kept set is a prefix)."""
    kept = raw.masked_fill(probs <= 0, float("inf")).min(dim=-1).values
    if min_p <= 0.0:
        return kept
    threshold = raw.max(dim=-1).values + temperature * math.log(min_p)
    return torch.where(below, threshold, kept)


def truncation_gaps(
    logits: torch.Tensor,
    index: torch.Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
) -> torch.Tensor:
    """Per row, how far the token fell outside the truncation, in tempered mass (>= 0; 0 where
    it is inside): the first step that removed it decides (min-p, top-k, then top-p)."""
    scaled = tempered(logits, temperature)
    tempered_probs = torch.softmax(scaled, dim=-1)
    own = tempered_probs.gather(-1, index)[:, 0]
    outside_min_p = below_min_p(logits, index, temperature, min_p)
    cut = top_k_cut(min_p_cut(scaled, min_p), top_k)
    outside_k = torch.isinf(cut.gather(-1, index)[:, 0])
    kept = cut > float("-inf")
    # Below top-k: the k-th kept token's tempered probability minus its own.
    kth = tempered_probs.masked_fill(~kept, float("inf")).min(dim=-1).values
    gap = torch.where(outside_k, (kth - own).clamp(min=0.0), torch.zeros_like(own))
    # Below min-p: min_p times the top token's tempered probability minus its own.
    floor = min_p * tempered_probs.max(dim=-1).values
    gap = torch.where(outside_min_p, (floor - own).clamp(min=0.0), gap)
    if top_p < 1.0:
        after_k = torch.softmax(cut, dim=-1)
        before = mass_above_token(after_k, index)
        kept_mass = tempered_probs.masked_fill(~kept, 0.0).sum(dim=-1)
        outside_p = ~outside_k & (before >= top_p)
        gap = torch.where(outside_p, (before - top_p) * kept_mass, gap)
    return gap


def score_continuation(
    model: Any,
    prompt: list[int],
    continuation: list[int],
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    top_logprobs: int,
    processors: Processors,
    grammar: torch.Tensor | None = None,
) -> list[PositionScore]:
    """Every continuation token scored by one prefill of the target (module docstring), under
    `grammar`'s bitmask per position where the continuation was drawn under one."""
    logits = continuation_logits(model, prompt, continuation)
    history = History(processors, prompt, [], grammar)
    paths = chain_paths(continuation).to(logits.device)
    processed = processed_logits(logits[None], [history], paths)[0]
    return score_rows(
        logits, continuation, temperature, top_k, top_p, min_p, top_logprobs, processed
    )
