"""Commit: where the accepted path's keys and values go in the slot cache, and which nodes it keeps.

Tree node j of row b was written at cache position prefix[b] + j. After the walk, the accepted
path (root first, one node per depth) must sit contiguously after the prefix, exactly where
autoregressive decoding would have written those tokens: the path node at depth d moves from
prefix + node to prefix + d. Depths past the end of a row's path copy the root onto itself (a
no-op), so every row has the same number of moves and one batched gather/scatter does them all.
Rejected and padding keys stay beyond the committed length, where no mask ever lets a real row see
them.
"""

from __future__ import annotations

import torch


def kv_moves(path: torch.Tensor, prefix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(src, dst) cache positions [n, D+1] for ``SlotCache.commit``.

    ``path`` [n, D+1] is the accepted node per depth (0 = root, -1 past the end), ``prefix`` [n]
    the committed length of each row before this round.
    """
    accepted = path >= 0
    src = torch.where(accepted, path, 0) + prefix[:, None]
    depth = torch.arange(path.shape[1], device=path.device)[None, :]
    dst = torch.where(accepted, depth + prefix[:, None], prefix[:, None])
    return src, dst


def kept_nodes(path: torch.Tensor, n_accepted: torch.Tensor, row: int) -> torch.Tensor:
    """Node indices row ``row`` keeps in its cache: the root and its accepted draft nodes.

    The bonus token is not among them: it becomes the next round's root, whose keys are written
    by that round's verify.
    """
    return path[row, : int(n_accepted[row]) + 1]
