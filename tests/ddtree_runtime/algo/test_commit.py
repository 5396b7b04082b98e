"""Commit: the accepted path lands contiguously after the prefix, the rest is left alone."""

from __future__ import annotations

import torch

from ddtree_runtime.algo.commit import kept_nodes, kv_moves


def test_accepted_path_moves_to_prefix_plus_depth() -> None:
    # Row 0 accepted root -> node 2 -> node 5; row 1 only its root; row 2 root -> node 1.
    path = torch.tensor([[0, 2, 5], [0, -1, -1], [0, 1, -1]])
    prefix = torch.tensor([10, 3, 0])
    src, dst = kv_moves(path, prefix)
    assert src.tolist() == [[10, 12, 15], [3, 3, 3], [0, 1, 0]]
    assert dst.tolist() == [[10, 11, 12], [3, 3, 3], [0, 1, 0]]


def test_moves_applied_like_the_slot_cache_keep_only_the_path() -> None:
    """Gather first, then scatter (as SlotCache.commit does): overlapping moves stay correct."""
    path = torch.tensor([[0, 1, 3, 4], [0, 2, -1, -1]])
    prefix = torch.tensor([4, 7])
    n_accepted = torch.tensor([3, 1])
    buf = torch.arange(32).repeat(2, 1)  # position p holds the value p
    src, dst = kv_moves(path, prefix)
    rows = torch.arange(2)[:, None].expand_as(src)
    moved = buf[rows, src]
    buf[rows, dst] = moved
    for b in range(2):
        nodes = kept_nodes(path, n_accepted, b).tolist()
        p = int(prefix[b])
        assert buf[b, p : p + len(nodes)].tolist() == [p + j for j in nodes]
        assert buf[b, :p].tolist() == list(range(p))  # the committed prefix is untouched
    assert kept_nodes(path, n_accepted, 1).tolist() == [0, 2]
