"""The n-gram drafter: what followed earlier occurrences of the context's longest suffix."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

from ddtree_runtime.drafters.base import empty_proposal


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
        lps, toks = empty_proposal(len(contexts), depth, k)
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
