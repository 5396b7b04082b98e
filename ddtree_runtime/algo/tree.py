"""Draft-tree building: the best-first DDTree tree as a pure, batched tensor function.

A node is a tuple of ranks (r1..rd) into the drafter's per-position top-K lists; its score is
the sum of lp[i][r_i] (cumulative draft log-prob). DDTree pops the best node from a heap and
pushes its next sibling and its first child, which selects the B best-scoring nodes whose
parents are also chosen. ``build_tree`` computes the same set without a heap: the best B tuples
of length d extend the best B tuples of length d-1 (a prefix never scores below its extension),
so a beam of width B per depth followed by the best B of the union is exact (stable sorts break
ties toward shallower, earlier nodes). ``build_tree_reference`` is the per-request heap.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import torch

NEG_INF = float("-inf")


@dataclass
class TreeBatch:
    """Padded trees [batch, 1+B]; node 0 is the root, real nodes are 1..n_nodes, then padding."""

    tokens: torch.Tensor  # long; root token at 0, pad_token on padding
    parents: torch.Tensor  # long; -1 for the root and padding
    depths: torch.Tensor  # long; 0 for the root and padding
    real: torch.Tensor  # bool; root and drafted nodes
    n_nodes: torch.Tensor  # long [batch]; real non-root nodes

    def narrow(self, q_len: int) -> TreeBatch:
        """The first `q_len` columns: all real nodes when q_len > max(n_nodes) (padding trimmed)."""
        return TreeBatch(
            self.tokens[:, :q_len],
            self.parents[:, :q_len],
            self.depths[:, :q_len],
            self.real[:, :q_len],
            self.n_nodes,
        )


def tree_extent(tree: TreeBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row [batch]: the depth of its deepest drafted node, and the most drafted nodes at one
    depth (1 for a chain); both 0 for a root-only tree. Padding counts for neither."""
    drafted = tree.real & (tree.depths > 0)
    depth = torch.where(drafted, tree.depths, 0).max(dim=1).values
    per_depth = torch.zeros(
        (tree.depths.shape[0], int(depth.max()) + 1), dtype=torch.long, device=tree.depths.device
    )
    per_depth.scatter_add_(1, tree.depths, drafted.long())
    return depth, per_depth.max(dim=1).values


def mask_drafts(
    logprobs: torch.Tensor, budgets: torch.Tensor, topks: torch.Tensor, depths: torch.Tensor
) -> torch.Tensor:
    """-inf every rank >= topk and position >= depth (and everything when budget is 0)."""
    _, length, k = logprobs.shape
    rank_ok = torch.arange(k, device=logprobs.device)[None, None, :] < topks[:, None, None]
    pos_ok = torch.arange(length, device=logprobs.device)[None, :, None] < depths[:, None, None]
    keep = rank_ok & pos_ok & (budgets[:, None, None] > 0)
    return logprobs.masked_fill(~keep, NEG_INF)


def build_tree(
    logprobs: torch.Tensor,
    tokens: torch.Tensor,
    roots: torch.Tensor,
    budgets: torch.Tensor,
    topks: torch.Tensor,
    depths: torch.Tensor,
    max_budget: int,
    pad_token: int = 0,
) -> TreeBatch:
    """Best-first trees; logprobs/tokens [batch, L, K] sorted descending per position."""
    batch, length, k = logprobs.shape
    dev = logprobs.device
    q_len = 1 + max_budget
    out_tokens = torch.full((batch, q_len), pad_token, dtype=torch.long, device=dev)
    out_tokens[:, 0] = roots
    parents = torch.full((batch, q_len), -1, dtype=torch.long, device=dev)
    out_depths = torch.zeros((batch, q_len), dtype=torch.long, device=dev)
    real = torch.zeros((batch, q_len), dtype=torch.bool, device=dev)
    real[:, 0] = True
    if max_budget == 0 or length == 0 or k == 0:
        return TreeBatch(out_tokens, parents, out_depths, real, torch.zeros_like(roots))
    lp = mask_drafts(logprobs.to(torch.float64), budgets, topks, depths)

    # Depths where some request still has a candidate (one check, not one per level).
    alive = torch.isfinite(lp).any(dim=2).any(dim=0).tolist()
    length = next((d for d, ok in enumerate(alive) if not ok), length)
    if length == 0:
        return TreeBatch(out_tokens, parents, out_depths, real, torch.zeros_like(roots))
    # Beam per depth: scores, parent index into the previous level, rank at this depth.
    # Which of several equal scores a full beam keeps does not matter for correctness: every
    # kept node's parent is in the previous beam, and the union sort below is stable by depth.
    level_scores, level_parents, level_ranks = [], [], []
    beam = torch.zeros((batch, 1), dtype=torch.float64, device=dev)
    for d in range(length):
        cand = (beam[:, :, None] + lp[:, d, None, :]).reshape(batch, -1)  # [batch, W*K]
        if cand.shape[1] > max_budget:
            scores, idx = torch.topk(cand, max_budget, dim=1)
        else:
            scores = cand
            idx = torch.arange(cand.shape[1], device=dev).expand(batch, -1)
        level_scores.append(scores)
        level_parents.append(idx // k)
        level_ranks.append(idx % k)
        beam = scores
    n_levels = len(level_scores)
    widths = [s.shape[1] for s in level_scores]
    offsets = [0]
    for w in widths[:-1]:
        offsets.append(offsets[-1] + w)
    union_scores = torch.cat(level_scores, dim=1)  # ordered by depth: ties prefer shallower
    union_depth = torch.cat(
        [torch.full((batch, w), d + 1, dtype=torch.long, device=dev) for d, w in enumerate(widths)],
        dim=1,
    )
    # Parent as a union index; -1 marks depth-1 nodes (their parent is the root).
    union_parent = torch.cat(
        [torch.full_like(level_parents[0], -1)]
        + [level_parents[d] + offsets[d - 1] for d in range(1, n_levels)],
        dim=1,
    )
    union_token = torch.cat(
        [tokens[:, d, :].gather(1, level_ranks[d]) for d in range(n_levels)], dim=1
    )
    take = min(max_budget, union_scores.shape[1])
    top_scores, top_idx = torch.sort(union_scores, dim=1, descending=True, stable=True)
    top_scores, top_idx = top_scores[:, :take], top_idx[:, :take]
    keep = torch.isfinite(top_scores) & (torch.arange(take, device=dev)[None, :] < budgets[:, None])
    # Parents before children: order kept nodes by (depth, score rank); padding last.
    sel_depth = union_depth.gather(1, top_idx)
    order_key = torch.where(keep, sel_depth * (take + 1), (length + 2) * (take + 1))
    order_key = order_key + torch.arange(take, device=dev)[None, :]
    order = torch.argsort(order_key, dim=1)
    final_union = top_idx.gather(1, order)  # union index of each final node (1..take)
    final_keep = keep.gather(1, order)
    # Map union index -> final node index so parents can be remapped.
    node_of_union = torch.full((batch, union_scores.shape[1]), -1, dtype=torch.long, device=dev)
    positions = torch.arange(1, take + 1, device=dev).expand(batch, take)
    node_of_union.scatter_(1, final_union, torch.where(final_keep, positions, -1))
    up = union_parent.gather(1, final_union)
    par = torch.where(up >= 0, node_of_union.gather(1, up.clamp(min=0)), 0)
    final_depth = union_depth.gather(1, final_union)
    cols = slice(1, take + 1)
    out_tokens[:, cols] = torch.where(final_keep, union_token.gather(1, final_union), pad_token)
    parents[:, cols] = torch.where(final_keep, par, -1)
    out_depths[:, cols] = torch.where(final_keep, final_depth, 0)
    real[:, cols] = final_keep
    return TreeBatch(out_tokens, parents, out_depths, real, final_keep.sum(dim=1))


def build_tree_reference(
    logprobs: list[list[float]],
    tokens: list[list[int]],
    budget: int,
    topk: int,
    depth: int,
) -> list[tuple[int, int, int]]:
    """DDTree's heap for one request: [(token, parent node index, depth)], parents first, no root.

    Nodes are numbered 1.. in pop order; the result is re-sorted by depth (stable) with parents
    remapped, the same canonical order ``build_tree`` uses.
    """
    length = min(depth, len(logprobs))
    k = min(topk, len(logprobs[0]) if logprobs else 0)
    if budget <= 0 or length == 0 or k == 0:
        return []

    def lp(d: int, r: int) -> float:
        return logprobs[d][r] if r < k else NEG_INF

    popped: list[tuple[tuple[int, ...], int]] = []  # (ranks, parent pop index; 0 = root)
    heap: list[tuple[float, int, tuple[int, ...], int]] = [(-lp(0, 0), 0, (0,), 0)]
    counter = 1
    while heap and len(popped) < budget:
        neg, _, ranks, parent = heapq.heappop(heap)
        if neg == float("inf"):
            break
        popped.append((ranks, parent))
        me = len(popped)
        d = len(ranks) - 1
        score = -neg
        if ranks[-1] + 1 < k:  # next sibling
            sib = score - lp(d, ranks[-1]) + lp(d, ranks[-1] + 1)
            heapq.heappush(heap, (-sib, counter, ranks[:-1] + (ranks[-1] + 1,), parent))
            counter += 1
        if d + 1 < length:  # first child
            heapq.heappush(heap, (-(score + lp(d + 1, 0)), counter, ranks + (0,), me))
            counter += 1
    order = sorted(range(len(popped)), key=lambda i: len(popped[i][0]))
    new_index = {old + 1: new + 1 for new, old in enumerate(order)}
    new_index[0] = 0
    out = []
    for old in order:
        ranks, parent = popped[old]
        d = len(ranks) - 1
        out.append((tokens[d][ranks[-1]], new_index[parent], d + 1))
    return out
