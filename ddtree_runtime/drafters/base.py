"""The drafter interface every drafter implements, and the empty proposal they start from.

``propose(contexts, depth, k, hidden=None) -> (logprobs [B, L, K], tokens [B, L, K])``, sorted
descending per position, -inf where there is no candidate. ``contexts`` are the token ids up to and
including the pending root. ``hidden`` (target hidden states of accepted tokens) is for drafters
that condition on them, as DFlash does.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

NEG_INF = float("-inf")


class Drafter(Protocol):
    """What the engine calls once per verify round for the whole batch."""

    name: str

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


def empty_proposal(batch: int, depth: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """No candidate anywhere: all -inf (a root-only tree), to be filled in by a drafter."""
    return (
        torch.full((batch, depth, k), NEG_INF, dtype=torch.float32),
        torch.zeros((batch, depth, k), dtype=torch.long),
    )
