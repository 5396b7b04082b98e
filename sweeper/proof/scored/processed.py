"""Where one scored token fell in the distribution the target samples from: its randomized
probability integral transform (PIT), and the evidence when it could not have been sampled.

A lossless server at temperature > 0 draws every token from the target's processed distribution
(the logit processors, then temperature, top-k, top-p, min-p applied) given the tokens before it.
The logit processors (bias, penalties) are rebuilt first (`sweeper.proof.scored.processors`): what
follows works on the logprobs they leave (the raw ones where none acts), a position they cannot
be rebuilt at is `Unrebuilt`, never scored. Order the tokens by
processed probability (descending; ties by id); a token with processed probability p and mass
`above` strictly above it has u = above + V * p, V uniform on [0, 1]: uniform on [0, 1] under
the null, whatever the prefix, so the u of every token of every sample are i.i.d. uniform
(`sweeper.proof.scored.judge` tests that). A token with p = 0 is a proof of a violation, unless its
raw logprob lies within the near-tie margin (nats) of the boundary it fell outside, the
boundary's: the k-th token's (top-k), the nucleus's last token's (top-p), the min-p threshold
(numerics of a prefill against a decode move logits, so the margin is on their scale, the
scorer's own: `sweeper.proof.scored.catalog`): a near tie, never a proof. A margin in tempered mass
would not do: deep in the tail every token is a hair of the mass from any boundary.

Two bases, as the scorer gives them (`ScoreRecord.basis`):

- `exact` (the bundled runtime computes the processed distribution itself): p, above and gap as
  given (and `kept`, the tempered mass of the truncation a p = 0 token fell outside, where the
  scorer says, and `boundary`, the raw logprob of the least likely token it keeps); u is exact.
  The claims are never trusted alone: `sweeper.proof.scored.rebuilt` rebuilds them from the raw
  logprobs returned beside them, as the `topk` basis does.
- `topk` (vLLM, SGLang: raw logprobs of the top k per position, and the token's own raw logprob
  and rank): the processed distribution is rebuilt from the top k under the engine's processing
  `order`. Every step keeps a prefix of the tokens by probability (temperature keeps the order;
  top-k, top-p and min-p each keep the likeliest tokens), so the kept set is the top J tokens
  and a kept known token's u is (C[r-1] + V w_r) / Z: its tempered weight w_r, the weights C[r-1]
  above it, and the kept weight Z. Only Z (and J) depend on the tokens the engine did not
  return, the tail: its raw mass R = 1 - the top k's is known exactly (raw logprobs are
  normalised), each of its tokens is at most the k-th's raw probability m, so its tempered
  weight lies in [0, R m^(1/T - 1)] below temperature 1 (vocabulary-bounded above it). The steps
  carry Z's interval through, and u comes out as an interval: exact where the tail cannot
  matter (top-k at most k, a nucleus closed inside the top k, temperature 1 untruncated). A
  token outside the returned top k has u uniform on [Q, 1] under the null, Q the processed mass
  of the top k: used exactly, with Q's interval.

Beside its PIT, each position gets its score for temperature (`TemperatureScore`), a step
function of u built from the returned top k: the scored test's direction statistic.

Temperature must come first in `order` (as in every engine supported); a step named `a+b`
applies a and b to the same distribution and keeps what both keep (a joint filter), otherwise
each step acts on what the previous one left, renormalised.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sweeper.proof.scored.processors import (
    Context,
    Logits,
    Sampling,
    Unrebuilt,
    logits_of,
)

#: The vocabulary bound used where the tail's tempered weight grows with the vocabulary (above
#: temperature 1): larger than any served model's (Gemma 3: 262,144).
VOCAB_BOUND = 1 << 20


@dataclass(frozen=True)
class Impossible:
    """A token the target's processed distribution gives probability 0, and how far out."""

    token: int
    rank: int | None
    #: How far outside the truncation it fell, in tempered probability mass (a lower bound
    #: where the tail was not returned); None where the scorer did not say.
    gap: float | None
    #: The step that removed it ("top_k", "top_p", "min_p"), where known.
    step: str | None
    #: The tempered mass kept by the truncation it fell outside (the nucleus), where known.
    kept: float | None
    #: How far its raw logprob lies below the boundary's (the k-th token's, the nucleus's last
    #: token's, the min-p threshold), in nats (a lower bound where the tail was not returned):
    #: what a near tie is judged by; None where the scorer did not say.
    nats: float | None = None

    def near(self, margin: float) -> bool:
        """A near tie at `margin` (nats): within it of the boundary; never without a distance."""
        return self.nats is not None and self.nats < margin

    def text(self) -> str:
        """`token 1234 (rank 57) 0.41 nats below the top-p boundary (kept mass 0.912, by 0.031
        of the tempered mass)`."""
        rank = f" (rank {self.rank})" if self.rank is not None else ""
        where = _WHERE.get(self.step or "", "the truncation")
        far = f" {self.nats:.3g} nats below" if self.nats is not None else " outside"
        mass = [f"kept mass {self.kept:.3g}"] if self.kept is not None else []
        mass += [f"by {self.gap:.3g} of the tempered mass"] if self.gap is not None else []
        shown = f" ({', '.join(mass)})" if mass else ""
        return f"token {self.token}{rank}{far} {where}{shown}"


_WHERE = {
    "top_k": "the top-k boundary",
    "top_p": "the top-p boundary",
    "min_p": "the min-p threshold",
}


@dataclass(frozen=True)
class TokenPit:
    """One token's PIT as bounds linear in V: u lies in [lo0 + V lo1, hi0 + V hi1]. `exact`:
    the bounds are one (the tail could not matter). `impossible`: p = 0 (then the bounds are
    unused); `near_tie`: impossible by less than the margin, never a proof."""

    lo0: float
    lo1: float
    hi0: float
    hi1: float
    exact: bool
    impossible: Impossible | None = None
    near_tie: bool = False
    #: Why the position's processed distribution cannot be rebuilt (then nothing else holds).
    unrebuilt: Unrebuilt | None = None

    def bounds(self, v: float) -> tuple[float, float]:
        lo, hi = self.lo0 + v * self.lo1, self.hi0 + v * self.hi1
        return min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)


def pit(
    position: Mapping[str, Any],
    basis: str,
    sampling: Sampling,
    margin: float,
    vocab: int = 0,
    context: Context | None = None,
) -> TokenPit:
    """The PIT and evidence of one `PositionScore` row (module docstring); `margin`: the
    near-tie margin in nats (processed logprob below the boundary's); `vocab`: the vocabulary
    size where known (else `VOCAB_BOUND`); `context`: the tokens its penalties count
    (`sweeper.proof.scored.processors`). On basis `exact` the claims, unchecked
    (`sweeper.proof.scored.rebuilt` checks them)."""
    if sampling.temperature <= 0:
        raise ValueError(f"temperature {sampling.temperature:g}: only sampled tokens are scored")
    if basis == "exact":
        return _exact(position, sampling, margin)
    if basis == "topk":
        found = processed(position, sampling, vocab or VOCAB_BOUND, context)
        return unrebuilt_pit(found) if isinstance(found, Unrebuilt) else pit_of(found, margin)
    raise ValueError(f"unknown scoring basis {basis!r} (exact | topk)")


def unrebuilt_pit(why: Unrebuilt) -> TokenPit:
    """A position that cannot be rebuilt: no PIT, no evidence, only why."""
    return TokenPit(0.0, 1.0, 0.0, 1.0, exact=False, unrebuilt=why)


def _exact(position: Mapping[str, Any], sampling: Sampling, margin: float) -> TokenPit:
    p, above = float(position["p"]), float(position["above"])
    if p > 0.0:
        return TokenPit(above, p, above, p, exact=True)
    gap = _maybe(position.get("gap"), float)
    rank = _maybe(position.get("rank"), int)
    kept = _maybe(position.get("kept"), float)
    boundary = _maybe(position.get("boundary"), float)
    nats = None if boundary is None else max(0.0, boundary - float(position["logprob"]))
    step = _exact_step(rank, sampling)
    evidence = Impossible(int(position["token"]), rank, gap, step, kept, nats)
    near = evidence.near(margin)
    return TokenPit(1.0, 0.0, 1.0, 0.0, exact=True, impossible=evidence, near_tie=near)


def _exact_step(rank: int | None, sampling: Sampling) -> str | None:
    """Which step removed a token the exact scorer gave p = 0, as far as its rank tells:
    top-k where it ranks below it, else the only other truncation asked for."""
    ranked = rank is not None and not sampling.processes_logits  # a raw rank, else
    if sampling.active("top_k") and ranked and int(rank or 0) > int(sampling.top_k or 0):
        return "top_k"
    others = [step for step in ("top_p", "min_p") if sampling.active(step)]
    return others[0] if len(others) == 1 and not sampling.active("top_k") else None


@dataclass
class _State:
    """What the steps have kept so far: the top `j_lo`..`j_hi` known tokens, and a kept tail
    weight in [t_lo, t_hi] (nonzero only where every known token is kept)."""

    j_lo: int
    j_hi: int
    t_lo: float
    t_hi: float


@dataclass
class _Top:
    """A position's returned top k as tempered weights relative to the top token's."""

    weights: list[float]
    cumulative: list[float]  # cumulative[j]: the first j tokens' weight
    tail_max: float  # the largest a tail token's weight can be (the bound's)
    total_lo: float  # the untruncated tempered total's bounds
    total_hi: float

    @property
    def k(self) -> int:
        return len(self.weights)


def _top_of(logits: Logits, temperature: float, vocab: int, own: float) -> _Top:
    """The known prefix's tempered weights and the tail's bounds (module docstring): each tail
    token's processed probability is at most its raw one and at most the bound's (`m`); the
    processors lowered some of the unreturned ones, so only `tail_sure` of their mass counts
    towards the least weight; the returned tokens pushed into the tail add their exact weights;
    `own`: the scored token's exact weight where it is in the tail (else 0)."""
    first = logits.known[0][1]
    a = 1.0 / temperature
    weights = [math.exp((lp - first) * a) for _, lp in logits.known]
    cumulative = [0.0]
    for w in weights:
        cumulative.append(cumulative[-1] + w)
    raw_tail, sure = logits.tail, logits.tail_sure
    smallest = math.exp(logits.bound)
    scale = math.exp(-first * a)  # tempered weights are relative to the top token's
    others = max(vocab - logits.returned, 1)
    if raw_tail <= 0.0:
        lo = hi = 0.0
    elif a == 1.0:  # untempered: the tail's weight is its raw mass, known where nothing lowered
        lo, hi = sure * scale, raw_tail * scale
    elif a > 1.0:  # convex: the most weight with the tail packed into tokens at m
        lo, hi = 0.0, raw_tail * smallest ** (a - 1.0) * scale
    else:  # concave: the most weight with the tail spread over the vocabulary
        lo = sure * smallest ** (a - 1.0) * scale
        hi = others ** (1.0 - a) * raw_tail**a * scale
    pushed = sum(math.exp((lp - first) * a) for lp in logits.extras)
    lo = max(lo + pushed, own)  # a token outside the known prefix is itself in the tail
    tail_max = math.exp((logits.bound - first) * a)
    return _Top(weights, cumulative, tail_max, cumulative[-1] + lo, cumulative[-1] + hi + pushed)


@dataclass
class Processed:
    """A position's token under the asked processing, rebuilt from its returned top k: its rank
    in the known prefix (None: outside), its own tempered weight where outside (`own`: an upper
    bound; `own_lo`: what it certainly is, 0 where not exact), what the steps kept, and the
    evidence where a step certainly removed it."""

    token: int
    rank: int | None
    given_rank: int | None
    own: float
    own_lo: float
    #: The token's processed logprob (an upper bound where `own_lo` is not exact) and the top
    #: known token's, which tempered weights are relative to.
    own_lp: float
    first: float
    top: _Top
    state: _State
    removed: Impossible | None
    #: Whether any step but temperature acts (else every token is kept).
    truncated: bool

    @property
    def z(self) -> tuple[float, float]:
        """The kept tempered weight's bounds (relative to the top token's)."""
        c, state = self.top.cumulative, self.state
        return c[state.j_lo] + state.t_lo, c[state.j_hi] + state.t_hi


def processed(
    position: Mapping[str, Any], sampling: Sampling, vocab: int, context: Context | None = None
) -> Processed | Unrebuilt:
    """The token of one `topk` row (or an exact row with its top k) under `sampling`, its
    penalties counting `context` (`sweeper.proof.scored.processors`); why not where it cannot be
    rebuilt."""
    logits = logits_of(position, sampling, context)
    if isinstance(logits, Unrebuilt):
        return logits
    token = int(position["token"])
    ids = [t for t, _ in logits.known]
    rank = ids.index(token) + 1 if token in ids else None
    first = logits.known[0][1]
    a = 1.0 / sampling.temperature
    own = 0.0 if rank is not None else math.exp((logits.own - first) * a)
    own_lo = own if logits.own_exact else 0.0
    top = _top_of(logits, sampling.temperature, vocab, own_lo)
    given_rank = _maybe(position.get("rank"), int)
    # A raw rank is the processed one only where no logit processor reorders the tokens.
    raw = rank is None and given_rank is not None and not sampling.processes_logits
    tail_rank = given_rank if raw and given_rank is not None else top.k + 1
    state = _State(
        top.k, top.k, top.total_lo - top.cumulative[-1], top.total_hi - top.cumulative[-1]
    )
    removed: Impossible | None = None
    for step in sampling.order[1:]:
        active = [n for n in step.split("+") if sampling.active(n)]
        if not active:
            continue
        if removed is None:
            for name in active:
                at = (token, first, logits.own)
                removed = _removes(name, sampling, top, state, rank, own, tail_rank, at)
                if removed is not None:
                    break
        after = [_apply(name, sampling, top, state) for name in active]
        state = _State(
            min(s.j_lo for s in after),
            min(s.j_hi for s in after),
            min(s.t_lo for s in after),
            min(s.t_hi for s in after),
        )
    truncated = any(sampling.active(n) for step in sampling.order[1:] for n in step.split("+"))
    return Processed(
        token, rank, given_rank, own, own_lo, logits.own, first, top, state, removed, truncated
    )


def pit_of(processed: Processed, margin: float) -> TokenPit:
    """The PIT bounds of a token rebuilt from its top k (module docstring)."""
    top, state, rank, removed = processed.top, processed.state, processed.rank, processed.removed
    if removed is not None:
        evidence = replace(removed, rank=rank or processed.given_rank)
        near = evidence.near(margin)
        return TokenPit(1.0, 0.0, 1.0, 0.0, exact=False, impossible=evidence, near_tie=near)
    z_lo, z_hi = processed.z
    exact = z_lo == z_hi
    if rank is not None:
        above, weight = top.cumulative[rank - 1], top.weights[rank - 1]
        low = (above / z_hi, weight / z_hi)
        if rank <= state.j_lo:
            return TokenPit(*low, above / z_lo, weight / z_lo, exact=exact)
        return TokenPit(*low, 1.0, 0.0, exact=False)  # kept in some tails only: at the edge
    # Outside the known prefix: uniform on [Q, 1], Q the known tokens' processed share.
    known = top.cumulative[-1]
    q_lo, q_hi = known / (known + state.t_hi), known / (known + max(state.t_lo, processed.own_lo))
    return TokenPit(q_lo, 1.0 - q_lo, q_hi, 1.0 - q_hi, exact=q_lo == q_hi)


def _apply(name: str, sampling: Sampling, top: _Top, state: _State) -> _State:
    """One filter on the kept set (module docstring): each keeps a prefix."""
    k, c = top.k, top.cumulative
    if name == "top_k":
        cut = int(sampling.top_k or 0)
        if cut <= k:
            cut = _top_k_ties(top, cut)
            if cut < k:
                return _State(min(state.j_lo, cut), min(state.j_hi, cut), 0.0, 0.0)
            return _State(state.j_lo, state.j_hi, 0.0, state.t_hi)  # the tail may tie too
        return _State(state.j_lo, state.j_hi, 0.0, min(state.t_hi, (cut - k) * top.tail_max))
    if name == "min_p":
        floor = float(sampling.min_p or 0.0)  # relative to the top token, whose weight is 1
        keep = sum(1 for w in top.weights if w >= floor)
        tail_hi = state.t_hi if top.tail_max >= floor else 0.0
        return _State(min(state.j_lo, keep), min(state.j_hi, keep), 0.0, tail_hi)
    share = float(sampling.top_p if sampling.top_p is not None else 1.0)
    z_lo, z_hi = c[state.j_lo] + state.t_lo, c[state.j_hi] + state.t_hi
    j_lo = min(state.j_lo, sum(1 for i in range(k) if c[i] < share * z_lo))
    j_hi = min(state.j_hi, sum(1 for i in range(k) if c[i] < share * z_hi))
    if state.t_hi <= 0.0 or c[k] >= share * z_hi:
        return _State(j_lo, j_hi, 0.0, 0.0)
    t_hi = min(state.t_hi, share * z_hi - c[k] + top.tail_max)
    t_lo = max(0.0, min(state.t_lo, share * z_lo - c[k])) if state.j_lo == k else 0.0
    return _State(j_lo, j_hi, t_lo, t_hi)


def _top_k_ties(top: _Top, cut: int) -> int:
    """How many of the returned tokens top-k `cut` (at most k) keeps: every one tied with the
    `cut`-th, as the runtime's `top_k_cut` and vLLM's top-k keep them (bfloat16 logits tie
    often)."""
    return sum(1 for w in top.weights if w >= top.weights[cut - 1])


def _removes(
    name: str,
    sampling: Sampling,
    top: _Top,
    state: _State,
    rank: int | None,
    own: float,
    tail_rank: int,
    token: tuple[int, float, float],
) -> Impossible | None:
    """The evidence if the scored token (`token`: its id, the top known token's processed
    logprob and its own) is certainly removed by step `name` (whatever the tail), with the
    smallest gap any tail allows (so a near tie is never called a proof): in tempered mass, and
    in nats below the boundary's processed logprob (from the boundary's tempered weight,
    relative to the top token's like every weight here, and the token's processed logprob, so a
    token far in the tail, whose weight underflows, is still far)."""
    k, c = top.k, top.cumulative
    first, own_lp = token[1], token[2]
    weight = top.weights[rank - 1] if rank is not None else own
    where = rank if rank is not None else tail_rank
    total = top.total_hi

    def nats(boundary: float) -> float:
        below = sampling.temperature * math.log(boundary) + first - own_lp
        return max(0.0, below)

    if name == "top_k":
        cut = int(sampling.top_k or 0)
        if cut > k:  # the boundary is in the tail, unreturned: no gap can be shown
            if where <= cut:
                return None
            return Impossible(token[0], where, 0.0, name, c[k] / total, 0.0)
        last = top.weights[cut - 1]
        if where <= cut or weight >= last:  # tied with the k-th: kept
            return None
        kept = c[_top_k_ties(top, cut)]
        gap = max(0.0, last - weight) / total
        return Impossible(token[0], where, gap, name, kept / total, nats(last))
    if name == "min_p":
        floor = float(sampling.min_p or 0.0)
        if weight >= floor:
            return None
        return Impossible(token[0], where, (floor - weight) / total, name, None, nats(floor))
    share = float(sampling.top_p if sampling.top_p is not None else 1.0)
    z_hi = c[state.j_hi] + state.t_hi
    above = c[rank - 1] if rank is not None else c[k] + max(0, tail_rank - k - 1) * own
    if above < share * z_hi:
        return None
    size = sum(1 for i in range(state.j_hi) if c[i] < share * z_hi)  # the nucleus's
    gap = (above - share * z_hi) / total
    return Impossible(
        token[0], where, gap, name, c[size] / total, nats(top.weights[max(size, 1) - 1])
    )


def _maybe(value: Any, kind: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return kind(value)


@dataclass(frozen=True)
class TemperatureScore:
    """A position's score for temperature as a step function of its PIT u: on the interval a
    token takes in [0, 1] (tokens by probability, best first), minus the token's tempered logit
    centred on its mean: d/d(log T) of the token's log-probability, the locally most powerful
    statistic against a sampler hotter or colder than asked. Large where a hot sampler draws
    (the tail: u near 1), negative at the likeliest tokens. Built from the position's returned
    top k (processed by the asked parameters, the unreturned tail one step of its own), so it is
    fixed before the token is drawn: under the null u is uniform and the step function's mean
    (0) and variance below are exact whatever the top k left out; only power rests on it."""

    #: Upper edges of the steps in u (the last is 1), and the value on each.
    edges: tuple[float, ...]
    values: tuple[float, ...]
    #: The variance of the value at a uniform u (its mean is 0).
    variance: float

    def at(self, u: float) -> float:
        """The value at u (a step's upper edge belongs to the next step)."""
        return self.values[min(bisect.bisect_right(self.edges, u), len(self.values) - 1)]

    def widths(self) -> list[float]:
        """Each step's probability under the null (its share of [0, 1])."""
        out, below = [], 0.0
        for edge in self.edges:
            out.append(max(edge - below, 0.0))
            below = edge
        return out


def temperature_score(
    position: Mapping[str, Any], sampling: Sampling, context: Context | None = None
) -> TemperatureScore | None:
    """The position's `TemperatureScore` from its known prefix after the logit processors
    (`context`: what its penalties count), the tail (the returned tokens pushed into it
    included) one step; None without a returned top k, or where it cannot be rebuilt."""
    if not position.get("top"):
        return None
    logits = logits_of(position, sampling, context)
    if isinstance(logits, Unrebuilt):
        return None
    a = 1.0 / sampling.temperature
    logprobs = [lp for _, lp in logits.known]
    first = logprobs[0]
    weights = [math.exp((lp - first) * a) for lp in logprobs]
    raw_tail = logits.tail + sum(math.exp(lp) for lp in logits.extras)
    smallest = math.exp(logits.bound)
    # The tail as one step: half its largest tempered weight below temperature 1 (where it
    # lies between 0 and that), its least above; its logit a notch below the k-th token's.
    bound = raw_tail * smallest ** (a - 1.0) * math.exp(-first * a)
    weights.append(bound / 2 if a > 1.0 else bound)
    scaled = [lp * a for lp in logprobs] + [(logits.bound - 1.0) * a]
    keep = _kept(weights, sampling, tail_weight=smallest**a * math.exp(-first * a))
    total = sum(weights[:keep])
    q = [w / total for w in weights[:keep]] + [0.0] * (len(weights) - keep)
    mean = sum(p * x for p, x in zip(q, scaled, strict=True))
    values = [mean - x for x in scaled]  # -(logit - mean): d log p / d log T, up to a factor
    edges, above = [], 0.0
    for p in q:
        above += p
        edges.append(above)
    edges[-1] = 1.0
    variance = sum(p * v * v for p, v in zip(q, values, strict=True))
    return TemperatureScore(tuple(edges), tuple(values), variance)


def _kept(weights: list[float], sampling: Sampling, tail_weight: float) -> int:
    """How many of `weights` (best first, the tail last) the asked filters keep, each on what
    the previous left (a joint step: the least any of them keeps)."""
    keep = len(weights)
    for step in sampling.order[1:]:
        kept = [keep]
        for name in step.split("+"):
            if not sampling.active(name):
                continue
            if name == "top_k":
                kept.append(min(keep, int(sampling.top_k or keep)))
            elif name == "min_p":
                floor = float(sampling.min_p or 0.0)
                sizes = [w if i < len(weights) - 1 else tail_weight for i, w in enumerate(weights)]
                kept.append(sum(1 for w in sizes[:keep] if w >= floor))
            else:
                total, above, cut = sum(weights[:keep]), 0.0, 0
                while cut < keep and above < float(sampling.top_p or 1.0) * total:
                    above += weights[cut]
                    cut += 1
                kept.append(cut)
        keep = max(1, min(kept))
    return keep


def colder_ratio(score: TemperatureScore, factor: float) -> TemperatureScore:
    """The position's likelihood ratio of a sampler `factor` (< 1) times colder, less 1, as a step
    function of u on the temperature score's steps (the same top k and tail, processed as
    asked): q_f(token) / q(token) - 1, q_f the steps' probabilities raised to 1 / `factor` and
    renormalised. Summed over positions it is the locally most powerful statistic against a
    sampler that is `factor` colder on an unknown few of them (a mixture), where the score is
    against a slightly colder one on all. It rewards the likeliest tokens and is bounded below
    by -1: a tail draw (a hot sign) costs it little, so the tail's rare large steps that make
    the score noisy on its cold side do not reach it. The tail's colder mass is taken at its
    largest (every tail token as likely as the k-th), so its step's value is the k-th's and the
    function falls with u. Under the null its mean is 0 and its variance exact, as the score's."""
    if not 0.0 < factor < 1.0:
        raise ValueError(f"colder factor {factor:g}: must lie in (0, 1)")
    q = score.widths()
    kept = [i for i, p in enumerate(q) if p > 0.0]
    exponent = 1.0 / factor
    weights = [p**exponent for p in q]
    last = len(q) - 1  # the tail's step
    if q[last] > 0.0 and last > 0 and q[last - 1] > 0.0:
        weights[last] = q[last] * q[last - 1] ** (exponent - 1.0)
    total = sum(weights[i] for i in kept)
    values = [weights[i] / (q[i] * total) - 1.0 if q[i] > 0.0 else -1.0 for i in range(len(q))]
    variance = sum(q[i] * values[i] ** 2 for i in kept)
    return TemperatureScore(score.edges, tuple(values), variance)
