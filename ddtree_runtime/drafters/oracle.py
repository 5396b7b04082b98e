"""The oracle drafter (tests only): the target's known continuation, with seeded noise."""

from __future__ import annotations

import random
from typing import Any

import torch

from ddtree_runtime.drafters.base import empty_proposal


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
        lps, toks = empty_proposal(len(contexts), depth, k)
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
