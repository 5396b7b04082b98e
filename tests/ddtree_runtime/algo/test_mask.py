"""Tree mask and positions: visibility rules, inert padding, in-place writes."""

from __future__ import annotations

import torch

from ddtree_runtime.algo.mask import fill_tree_mask
from ddtree_runtime.algo.tree import build_tree


def sample_tree():
    lp = torch.log(torch.tensor([[[0.6, 0.3], [0.5, 0.4], [0.9, 0.05]]] * 2, dtype=torch.float64))
    tok = torch.arange(12).view(2, 3, 2) + 100
    return build_tree(
        lp,
        tok,
        torch.tensor([1, 2]),
        torch.tensor([5, 2]),
        torch.tensor([2, 2]),
        torch.tensor([3, 3]),
        5,
    )


def test_mask_invariants() -> None:
    tree = sample_tree()
    prefix = torch.tensor([10, 3])
    q, kv = 6, 64
    mask = torch.full((4, 1, q, 128), 7.0)  # stale garbage: every active value must be rewritten
    positions = torch.full((4, q), -5)
    view = mask[:, :, :, :kv]
    fill_tree_mask(view, positions, tree, prefix)
    assert (mask[2:] == 7.0).all() and (mask[:, :, :, kv:] == 7.0).all()  # only [:n, :kv]
    for b in range(2):
        p = int(prefix[b])
        for j in range(q):
            row = mask[b, 0, j, :kv]
            assert set(row.unique().tolist()) <= {0.0, float("-inf")}
            seen = {int(c) for c in torch.nonzero(row == 0).flatten()}
            if tree.real[b, j]:
                anc, node = set(), j
                while node >= 0:
                    anc.add(p + node)
                    node = int(tree.parents[b, node])
                assert seen == set(range(p)) | anc  # prefix + ancestors + self
                assert int(positions[b, j]) == p + int(tree.depths[b, j])
            else:
                assert seen == {p + j}  # padding sees only itself: finite softmax, never NaN
        pad_cols = [p + j for j in range(q) if not tree.real[b, j]]
        assert pad_cols or b == 0  # request 1 has padding (budget 2 of 5)
        real_rows = tree.real[b]
        assert (mask[b, 0][real_rows][:, pad_cols] == float("-inf")).all()


def test_softmax_over_mask_rows_is_finite() -> None:
    tree = sample_tree()
    mask = torch.zeros((2, 1, 6, 64))
    fill_tree_mask(mask, torch.zeros((2, 6), dtype=torch.long), tree, torch.tensor([0, 5]))
    assert torch.isfinite(torch.softmax(mask, dim=-1)).all()
