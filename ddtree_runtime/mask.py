"""Tree attention mask and position ids, written in place into preallocated buffers.

Query length is fixed at 1+B so a captured CUDA graph can replay on fresh values. Tree node j of
request b is written to cache column prefix[b]+j. Real rows see the committed prefix, their
ancestors and themselves; padding rows see only themselves (a finite softmax, never NaN); real rows
never see padding columns. Position ids are prefix + depth.

``_FAULTS`` exists only so tests can prove the exactness tests catch a broken mask: "pad_visible"
lets real rows see padding columns, "stale_positions" skips the position update.
"""

from __future__ import annotations

import torch

from ddtree_runtime.tree import TreeBatch

_FAULTS: set[str] = set()


def ancestors(tree: TreeBatch) -> torch.Tensor:
    """[batch, q, q] bool: node j sees node i (i is j or an ancestor of j); padding sees itself."""
    batch, q = tree.parents.shape
    eye = torch.eye(q, dtype=torch.bool, device=tree.parents.device).expand(batch, q, q)
    anc = eye.clone()
    max_depth = int(tree.depths.max()) if q > 1 else 0
    parent_rows = tree.parents.clamp(min=0)
    for d in range(1, max_depth + 1):
        # Parents come before children, so rows at depth d-1 are final when depth d is filled.
        inherited = anc.gather(1, parent_rows[:, :, None].expand(batch, q, q))
        at_d = (tree.depths == d) & tree.real
        anc = torch.where(at_d[:, :, None], inherited | eye, anc)
    return anc


def fill_tree_mask(
    mask: torch.Tensor,
    position_ids: torch.Tensor,
    tree: TreeBatch,
    prefix_lens: torch.Tensor,
) -> None:
    """Write the verify mask [n,1,q,kv] (0 / -inf) and position ids [n,q] for the active rows."""
    n, q = tree.parents.shape
    kv = mask.shape[-1]
    anc = ancestors(tree)
    if "pad_visible" in _FAULTS:
        anc = anc | (tree.real[:, :, None] & ~tree.real[:, None, :])
    real_rows = tree.real[:, :, None]
    cols = torch.arange(kv, device=mask.device)
    sees_prefix = (cols[None, None, :] < prefix_lens[:, None, None]) & real_rows
    view = mask[:n, 0]
    zero = torch.zeros((), dtype=mask.dtype, device=mask.device)
    ninf = torch.full((), float("-inf"), dtype=mask.dtype, device=mask.device)
    view.copy_(torch.where(sees_prefix, zero, ninf))
    tree_cols = (prefix_lens[:, None] + torch.arange(q, device=mask.device)[None, :])[:, None, :]
    view.scatter_(2, tree_cols.expand(n, q, q), torch.where(anc, zero, ninf))
    if "stale_positions" not in _FAULTS:
        position_ids[:n].copy_(prefix_lens[:, None] + tree.depths)


def causal_mask(length: int, kv: int, start: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """[1,1,length,kv] float mask for a prefill of `length` tokens written at `start`."""
    rows = torch.arange(length, device=device)[:, None] + start
    cols = torch.arange(kv, device=device)[None, :]
    out = torch.zeros((length, kv), dtype=dtype, device=device)
    out.masked_fill_(cols > rows, float("-inf"))
    return out[None, None]
