"""Tree attention mask and position ids, written in place into preallocated buffers.

With ``cuda_graph`` requested the query length is fixed at 1+B (a captured graph replays on fresh
values; on CPU the engine keeps the same shape without a graph); otherwise the engine passes views
trimmed to the batch's largest tree. Tree node j of request b is written to cache column
prefix[b]+j. Real rows see the committed prefix, their ancestors and themselves; padding rows see
only themselves (a finite softmax, never NaN); real rows never see padding columns. Position ids
are prefix + depth.

Planted faults (tests only): ``_FAULTS`` holds the names of deliberate bugs, so tests can prove
the exactness checks catch a broken mask: "pad_visible" lets real rows see padding columns,
"stale_positions" skips the position update; "unverified_b<N>" (e.g. "unverified_b16", checked by
the engine) accepts drafts unverified on a server started with budget N only, the fast-but-wrong
config a search must never return; "hot_drafts" / "cold_drafts" / "untruncated_drafts" (checked
by the engine) sample drafted positions (tree depth >= 1) at temperature x 1.6 / x 0.6 / without
top-k and top-p, so only sampled DDTree output differs from AR (greedy and AR servers stay
exact); "blind_drafts" (checked by the engine) accepts no drafted token: exact output at tau 1, a
drafter that proposes nothing. The request-processor faults act on drafted nodes only too:
"penalty_committed_only", "penalty_whole_tree", "penalty_whole_batch",
"penalties_drafts_ignored", "logit_bias_drafts_ignored" and
"grammar_drafts_unmasked" (drafted nodes choose without the grammar mask) (``processors``),
"min_p_drafts_ignored" (``verify.DRAFT_SAMPLING_FAULTS``) and "stop_round_end" (the engine looks
for stop strings only at a round's last token). In-process tests add a name to the set. To
plant one in a *copy* of the package (a runtime to deploy), replace the one line of this file
that reads exactly ``_FAULTS: set[str] = set()`` with ``_FAULTS: set[str] = {"pad_visible"}`` (or
``{"stale_positions"}``). That line is part of the contract: a test checks it occurs exactly once
and that the patched copy carries the fault.
"""

from __future__ import annotations

import torch

from ddtree_runtime.algo.tree import TreeBatch

_FAULTS: set[str] = set()


def ancestor_index(tree: TreeBatch) -> torch.Tensor:
    """[batch, q, D+1] node indices each row sees: itself and its ancestors (repeats allowed).

    Pointer chasing up the parent links; the root and padding rows stay on themselves, so padding
    sees only itself.
    """
    ptr = torch.arange(tree.parents.shape[1], device=tree.parents.device).expand_as(tree.parents)
    steps = [ptr]
    for _ in range(int(tree.depths.max())):
        up = tree.parents.gather(1, ptr)
        ptr = torch.where(up >= 0, up, ptr)
        steps.append(ptr)
    return torch.stack(steps, dim=-1)


def fill_tree_mask(
    mask: torch.Tensor,
    position_ids: torch.Tensor,
    tree: TreeBatch,
    prefix_lens: torch.Tensor,
) -> None:
    """Write the verify mask [n,1,q,kv] (0 / -inf) and position ids [n,q] for the active rows."""
    n, q = tree.parents.shape
    kv = mask.shape[-1]
    view = mask[:n, 0]
    view.fill_(float("-inf"))
    cols = torch.arange(kv, device=mask.device)
    sees_prefix = (cols[None, None, :] < prefix_lens[:, None, None]) & tree.real[:, :, None]
    view.masked_fill_(sees_prefix, 0.0)
    # Tree node j of row b lives in cache column prefix[b] + j.
    view.scatter_(2, prefix_lens[:, None, None] + ancestor_index(tree), 0.0)
    if "pad_visible" in _FAULTS:  # test-only fault: real rows also see the padding columns
        pad_cols = (prefix_lens[:, None] + torch.arange(q, device=mask.device))[:, None, :]
        pad_cols = pad_cols.expand(n, q, q)
        leak = tree.real[:, :, None] & ~tree.real[:, None, :]
        view.scatter_(2, pad_cols, view.gather(2, pad_cols).masked_fill(leak, 0.0))
    if "stale_positions" not in _FAULTS:
        position_ids[:n].copy_(prefix_lens[:, None] + tree.depths)


def fill_decode_mask(
    mask: torch.Tensor, position_ids: torch.Tensor, prefix_lens: torch.Tensor
) -> None:
    """Plain AR decode (one query row per request, written at column prefix[b]): the row sees the
    prefix and itself, at position prefix[b].

    Deliberately separate from ``fill_tree_mask``: an AR server is the reference DDTree output is
    judged against, so it must not share the tree mask and position code under test (a fault there
    would otherwise break AR and DDTree alike and stay invisible).
    """
    n = prefix_lens.shape[0]
    view = mask[:n, 0, 0]
    cols = torch.arange(view.shape[-1], device=mask.device)
    view.copy_(torch.where(cols[None, :] <= prefix_lens[:, None], 0.0, float("-inf")))
    position_ids[:n, 0].copy_(prefix_lens)


def causal_mask(length: int, kv: int, start: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """[1,1,length,kv] float mask for a prefill of `length` tokens written at `start`."""
    rows = torch.arange(length, device=device)[:, None] + start
    cols = torch.arange(kv, device=device)[None, :]
    out = torch.zeros((length, kv), dtype=dtype, device=device)
    out.masked_fill_(cols > rows, float("-inf"))
    return out[None, None]
