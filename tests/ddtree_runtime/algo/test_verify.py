"""The verification walk: accepted path, bonus token, and padding that is never matched."""

from __future__ import annotations

import torch

from ddtree_runtime.algo.tree import TreeBatch
from ddtree_runtime.algo.verify import walk


def tree_with_padding(pad_token: int) -> TreeBatch:
    # root(0) -> a(1)=5 -> c(3)=7 ; root -> b(2)=6 ; nodes 4, 5 are padding
    tokens = torch.tensor([[9, 5, 6, 7, pad_token, pad_token]])
    parents = torch.tensor([[-1, 0, 0, 1, -1, -1]])
    depths = torch.tensor([[0, 1, 1, 2, 0, 0]])
    real = torch.tensor([[True, True, True, True, False, False]])
    return TreeBatch(tokens, parents, depths, real, torch.tensor([3]))


def test_walk_follows_matching_children_and_emits_the_bonus() -> None:
    tree = tree_with_padding(0)
    choices = torch.tensor([[5, 7, 1, 8, 3, 3]])  # root picks 5 (node a), a picks 7 (node c)
    v = walk(tree, choices)
    assert v.path[0].tolist() == [0, 1, 3] and int(v.n_accepted[0]) == 2
    assert v.emitted(0) == ([5, 7, 8], [0, 1, 3])  # accepted 5, 7 then bonus 8 chosen at c


def test_padding_whose_token_equals_the_choice_is_never_accepted() -> None:
    tree = tree_with_padding(pad_token=4)
    choices = torch.tensor([[4, 4, 4, 4, 4, 4]])  # every node (padding too) "predicts" 4
    v = walk(tree, choices)
    assert int(v.n_accepted[0]) == 0 and v.emitted(0) == ([4], [0])
