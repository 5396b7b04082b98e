"""Synthetic scored samples for the scored test's tests: a made-up target (fixed logits per
prompt and position), samplers that are right or wrong in known ways, and the `ScoreRecord` rows
a scorer would write for their samples, on either basis.

The target's processing is written here from its definition (numpy, token by token), not taken
from `sweeper.proof.scored.processed`, so the tests compare two readings of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

ORDER = ("temperature", "top_k", "top_p", "min_p")


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def ranked(probs: np.ndarray) -> np.ndarray:
    """Token ids by probability descending, ties by id ascending."""
    return np.lexsort((np.arange(probs.size), -probs))


def processed(
    logits: np.ndarray,
    temperature: float,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    order: Sequence[str] = ORDER,
) -> np.ndarray:
    """The processed distribution: temperature, then each filter on what the previous left,
    renormalised (`a+b`: both on the same distribution, kept where both keep)."""
    probs = softmax(logits / temperature)
    keep = np.ones(probs.size, dtype=bool)
    for step in order[1:]:
        current = np.where(keep, probs, 0.0)
        current = current / current.sum()
        masks = []
        for name in step.split("+"):
            mask = np.ones(probs.size, dtype=bool)
            if name == "top_k" and top_k:
                mask[:] = False
                mask[ranked(current)[:top_k]] = True
            elif name == "top_p" and top_p is not None and top_p < 1:
                order_ = ranked(current)
                above = np.cumsum(current[order_]) - current[order_]
                mask[order_[above >= top_p]] = False
            elif name == "min_p" and min_p:
                mask = current >= min_p * current.max()
            masks.append(mask)
        keep &= np.logical_and.reduce(masks)
    out = np.where(keep, probs, 0.0)
    return out / out.sum()


def above_of(probs: np.ndarray, token: int) -> float:
    return float(_aboves(probs)[token])


def _aboves(probs: np.ndarray) -> np.ndarray:
    """Per token, the mass strictly above it (probability descending, ties by id)."""
    order = ranked(probs)
    out = np.empty_like(probs)
    out[order] = np.cumsum(probs[order]) - probs[order]
    return out


def position_table(
    z: np.ndarray,
    order: Sequence[str],
    asked: dict[str, Any],
    drawn: dict[str, Any],
    k: int,
    claimed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One position's scores of every token (p and above as processed by `claimed`, else as
    `asked`), and the sampler's CDF there."""
    raw = z - (np.log(np.exp(z - z.max()).sum()) + z.max())
    rank = np.empty(z.size, dtype=np.int64)
    rank[ranked(raw)] = np.arange(1, z.size + 1)
    scoring = processed(z, order=order, **(claimed or asked))
    return {
        "raw": raw,
        "rank": rank,
        "top": [(int(i), float(raw[i])) for i in ranked(raw)[:k]],
        "p": scoring,
        "above": _aboves(scoring),
        "tempered": softmax(z / asked["temperature"]),
        "tempered_above": _aboves(softmax(z / asked["temperature"])),
        "top_k": asked["top_k"],
        "top_p": asked["top_p"],
        "cdf": np.cumsum(processed(z, order=order, **drawn)),
    }


def exact_position(table: dict[str, Any], token: int) -> dict[str, Any]:
    """`token`'s `PositionScore` as the bundled runtime's exact route writes it; where p is 0,
    `gap` (tempered mass: below top-k the k-th token's tempered probability less its own, else
    the mass above it beyond top-p) and `boundary` (the least likely kept token's raw logprob)."""
    p = float(table["p"][token])
    position = {
        "token": token,
        "logprob": float(table["raw"][token]),
        "rank": int(table["rank"][token]),
        "top": table["top"],
        "p": p,
        "above": float(table["above"][token]) if p > 0 else 1.0,
        "gap": None,
        "boundary": None,
    }
    if p > 0:
        return position
    tempered, top_k = table["tempered"], table["top_k"]
    if top_k and table["rank"][token] > top_k:
        gap = float(np.sort(tempered)[::-1][top_k - 1] - tempered[token])
    else:
        gap = float(table["tempered_above"][token]) - (table["top_p"] or 1.0)
    boundary = float(table["raw"][table["p"] > 0].min())
    return position | {"gap": gap, "boundary": boundary}


def target(prompts: int, positions: int, vocab: int, seed: int) -> np.ndarray:
    """[prompts, positions, vocab] logits: a mix of confident and open positions."""
    rng = np.random.default_rng(seed)
    spread = rng.choice([1.0, 2.5, 5.0], size=(prompts, positions, 1))
    return rng.normal(size=(prompts, positions, vocab)) * spread


def records(
    logits: np.ndarray,
    samples: int,
    *,
    temperature: float = 0.7,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    drawn_as: dict[str, Any] | None = None,
    basis: str = "exact",
    k: int = 8,
    role: str = "test",
    point_id: str = "p1",
    seed: int = 0,
    order: Sequence[str] = ORDER,
    faulty: Sequence[int] | None = None,
    scored_as: dict[str, Any] | None = None,
    near_tie_margin: float | None = None,
) -> list[dict[str, Any]]:
    """`samples` per prompt, each position drawn independently from the distribution
    `drawn_as` changes (e.g. {"temperature": 1.12}: a hotter sampler), scored against the one
    asked for; ScoreRecord rows as a scorer of `basis` writes them (`k`: its top logprobs).
    `faulty`: the only positions (of every prompt) `drawn_as` acts on (as a drafted position's
    fault), else all. `scored_as`: what changes the processing the scorer's claimed p and above
    come from (a scorer whose processing is wrong, its raw logprobs right), else as asked.
    `near_tie_margin`: the scorer's, in nats, where it states one."""
    asked = {"temperature": temperature, "top_p": top_p, "top_k": top_k, "min_p": min_p}
    drawn = {**asked, **(drawn_as or {})}
    claimed = {**asked, **(scored_as or {})}
    rng = np.random.default_rng(seed)
    rows = []
    for prompt in range(logits.shape[0]):
        table = [
            position_table(
                z, order, asked, drawn if faulty is None or at in faulty else asked, k, claimed
            )
            for at, z in enumerate(logits[prompt])
        ]
        cdfs = np.stack([t["cdf"] for t in table])
        for index in range(samples):
            draws = rng.random(len(table))
            tokens = [min(int(np.searchsorted(c, u, side="right")), c.size - 1)
                      for c, u in zip(cdfs, draws, strict=True)]  # fmt: skip
            positions = []
            for t, token in zip(table, tokens, strict=True):
                position: dict[str, Any] = {
                    "token": token,
                    "logprob": float(t["raw"][token]),
                    "rank": int(t["rank"][token]),
                    "top": t["top"],
                }
                if basis == "exact":
                    position = exact_position(t, token)
                positions.append(position)
            rows.append(
                {
                    "point_id": point_id,
                    "role": role,
                    "prompt_id": f"q{prompt}",
                    "index": index,
                    "scorer": "self",
                    "basis": basis,
                    **asked,
                    "order": list(order),
                    "k": k,
                    "positions": positions,
                    "error": None,
                    **({} if near_tie_margin is None else {"near_tie_margin": near_tie_margin}),
                }
            )
    return rows
