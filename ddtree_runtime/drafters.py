"""Drafters: per-position top-K draft distributions for the next L positions.

Interface: ``propose(contexts, depth, k, hidden=None) -> (logprobs [B, L, K], tokens [B, L, K])``,
sorted descending per position, -inf where there is no candidate. ``contexts`` are the token ids
up to and including the pending root. ``hidden`` (target hidden states of accepted tokens) is for
drafters that condition on them, as DFlash does.

``ngram`` looks up suffix matches in the context; ``oracle`` (tests only) knows the target's greedy
continuations and adds controllable noise; ``dflash:PATH`` validates a DFlash checkpoint but
cannot draft yet and says so.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

import torch

from ddtree_runtime.models import LoadedModel

NEG_INF = float("-inf")


class Drafter(Protocol):
    name: str

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


def _empty(batch: int, depth: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.full((batch, depth, k), NEG_INF, dtype=torch.float32),
        torch.zeros((batch, depth, k), dtype=torch.long),
    )


class NgramDrafter:
    """Suffix-match lookup: the longest n-gram suffix that occurred before predicts what follows.

    For the longest n (max_n down to min_n) with earlier matches, the tokens following each match
    at offset i are counted; their frequencies give position i's distribution. No match: all -inf,
    so the tree is the root only (a plain AR step).
    """

    name = "ngram"

    def __init__(self, max_n: int = 4, min_n: int = 1, max_matches: int = 64) -> None:
        self.max_n, self.min_n, self.max_matches = max_n, min_n, max_matches

    def _matches(self, ctx: list[int]) -> tuple[int, list[int]]:
        for n in range(min(self.max_n, len(ctx) - 1), self.min_n - 1, -1):
            suffix = ctx[-n:]
            found = [
                s
                for s in range(len(ctx) - n - 1, -1, -1)  # most recent first
                if ctx[s : s + n] == suffix
            ][: self.max_matches]
            if found:
                return n, found
        return 0, []

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lps, toks = _empty(len(contexts), depth, k)
        for b, ctx in enumerate(contexts):
            n, starts = self._matches(ctx)
            for i in range(depth):
                follow = Counter(ctx[s + n + i] for s in starts if s + n + i < len(ctx))
                total = sum(follow.values())
                # most_common is stable on ties (first seen = most recent match first)
                for r, (tok, count) in enumerate(follow.most_common(k)):
                    lps[b, i, r] = math.log(count / total)
                    toks[b, i, r] = tok
        return lps, toks


class OracleDrafter:
    """Test-only: proposes the target's known greedy continuation, with seeded noise.

    ``references`` are full sequences (prompt + greedy continuation from the AR reference). The true
    token at each position is demoted to a lower rank with probability ``demote``, dropped with
    probability ``drop``; other ranks are random distractors. Deterministic per (context, position).
    """

    name = "oracle"

    def __init__(
        self,
        references: list[list[int]],
        vocab_size: int,
        demote: float = 0.25,
        drop: float = 0.15,
        seed: int = 0,
    ) -> None:
        self.references = references
        self.vocab_size = vocab_size
        self.demote, self.drop, self.seed = demote, drop, seed

    def _reference(self, ctx: list[int]) -> list[int] | None:
        for ref in self.references:
            if len(ref) >= len(ctx) and ref[: len(ctx)] == ctx:
                return ref
        return None

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lps, toks = _empty(len(contexts), depth, k)
        for b, ctx in enumerate(contexts):
            ref = self._reference(ctx)
            for i in range(depth):
                rng = random.Random(hash((self.seed, tuple(ctx[-8:]), len(ctx), i)))
                true = ref[len(ctx) + i] if ref is not None and len(ctx) + i < len(ref) else None
                cands = [t for t in rng.sample(range(self.vocab_size), k + 1) if t != true][:k]
                if true is not None and rng.random() >= self.drop:
                    rank = rng.randrange(1, k) if k > 1 and rng.random() < self.demote else 0
                    cands[rank] = true
                scores = sorted((rng.uniform(-4.0, -0.05) for _ in range(k)), reverse=True)
                lps[b, i] = torch.tensor(scores)
                toks[b, i] = torch.tensor(cands)
        return lps, toks


class DFlashDrafter:
    """A DFlash draft checkpoint from a local directory: validated, NOT runnable in this build.

    DFlash drafts a whole block in one forward conditioned on the target's hidden states of the
    accepted tokens. This engine does not collect those hidden states yet, and no checkpoint or
    GPU was available to develop against, so after checking the checkpoint this raises a clear
    error instead of pretending to draft.
    """

    name = "dflash"

    def __init__(self, path: str, loaded: LoadedModel) -> None:
        directory = Path(path)
        if not (directory / "config.json").is_file():
            raise ValueError(f"dflash: {directory} is not a checkpoint directory (no config.json)")
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        if "block_size" not in config and "block_size" not in config.get("dflash_config", {}):
            raise ValueError(f"dflash: {directory}/config.json has no block_size")
        raise ValueError(
            "dflash: drafting from a DFlash checkpoint is not implemented in this runtime yet "
            "(it needs the target's hidden states); use --draft ngram"
        )

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError("dflash drafting is not implemented")


def make_drafter(spec: str, loaded: LoadedModel, **oracle_args: Any) -> Drafter:
    """'ngram' | 'dflash:PATH' | 'oracle' (tests only: pass references=...)."""
    if spec == "ngram":
        return NgramDrafter()
    if spec.startswith("dflash:"):
        path = spec.partition(":")[2]
        if not path:
            raise ValueError("dflash drafter needs a checkpoint path: dflash:/path/to/checkpoint")
        return DFlashDrafter(path, loaded)
    if spec == "oracle":
        if "references" not in oracle_args:
            raise ValueError("oracle drafter is test-only and needs references=[...]")
        vocab = int(loaded.model.config.vocab_size)
        return OracleDrafter(vocab_size=vocab, **oracle_args)
    raise ValueError(f"unknown drafter {spec!r}: use ngram, dflash:PATH or oracle")
