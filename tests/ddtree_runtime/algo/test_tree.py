"""Batched tree building equals DDTree's per-request heap, and its structural guarantees hold."""

from __future__ import annotations

import random

import torch

from ddtree_runtime.algo.tree import build_tree, build_tree_reference, tree_extent


def random_drafts(batch: int, length: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lp = torch.rand(batch, length, k, generator=g, dtype=torch.float64).log()
    lp[torch.rand(batch, length, k, generator=g) < 0.1] = float("-inf")  # absent candidates
    lp = lp.sort(dim=-1, descending=True).values
    tok = torch.stack([torch.randperm(5000, generator=g)[: length * k] for _ in range(batch)])
    return lp, tok.view(batch, length, k)


def as_lists(tree, b: int) -> list[tuple[int, int, int]]:
    n = int(tree.n_nodes[b])
    return [
        (int(tree.tokens[b, i]), int(tree.parents[b, i]), int(tree.depths[b, i]))
        for i in range(1, n + 1)
    ]


def test_batched_tree_equals_heap_reference_on_random_tie_free_inputs() -> None:
    rng = random.Random(0)
    for trial in range(200):
        batch, length, k = 4, rng.randint(1, 9), rng.randint(1, 8)
        lp, tok = random_drafts(batch, length, k, trial)
        budgets = torch.tensor([rng.randint(0, 40) for _ in range(batch)])
        topks = torch.tensor([rng.randint(1, k) for _ in range(batch)])
        depths = torch.tensor([rng.randint(0, length) for _ in range(batch)])
        max_budget = int(budgets.max())
        tree = build_tree(
            lp, tok, torch.zeros(batch, dtype=torch.long), budgets, topks, depths, max_budget
        )
        assert tree.tokens.shape == (batch, 1 + max_budget)
        for b in range(batch):
            want = build_tree_reference(
                lp[b].tolist(), tok[b].tolist(), int(budgets[b]), int(topks[b]), int(depths[b])
            )
            assert as_lists(tree, b) == want, (trial, b)


def test_structure_parents_first_padding_inert_and_limits_respected() -> None:
    lp, tok = random_drafts(3, 6, 4, 7)
    budgets, topks = torch.tensor([16, 5, 0]), torch.tensor([4, 1, 3])
    tree = build_tree(
        lp,
        tok,
        torch.tensor([11, 12, 13]),
        budgets,
        topks,
        torch.tensor([6, 6, 6]),
        16,
        pad_token=99,
    )
    assert tree.tokens[:, 0].tolist() == [11, 12, 13] and tree.real[:, 0].all()
    for b in range(3):
        n = int(tree.n_nodes[b])
        assert n <= int(budgets[b])
        assert tree.real[b, 1 : n + 1].all() and not tree.real[b, n + 1 :].any()
        assert (tree.parents[b, n + 1 :] == -1).all() and (tree.tokens[b, n + 1 :] == 99).all()
        for i in range(1, n + 1):
            p = int(tree.parents[b, i])
            assert 0 <= p < i and int(tree.depths[b, i]) == int(tree.depths[b, p]) + 1
        children = torch.bincount(tree.parents[b, 1 : n + 1], minlength=17)
        assert int(children.max()) <= int(topks[b])
    # topk 1 gives a chain; budget 0 gives the root only
    assert tree.depths[1, 1 : int(tree.n_nodes[1]) + 1].tolist() == list(
        range(1, int(tree.n_nodes[1]) + 1)
    )
    assert int(tree.n_nodes[2]) == 0


def test_minus_inf_candidates_are_never_nodes() -> None:
    lp = torch.full((1, 3, 2), float("-inf"), dtype=torch.float64)
    lp[0, 0, 0] = -0.5
    tok = torch.arange(6).view(1, 3, 2)
    tree = build_tree(
        lp, tok, torch.tensor([7]), torch.tensor([8]), torch.tensor([2]), torch.tensor([3]), 8
    )
    assert int(tree.n_nodes[0]) == 1 and tree.tokens[0, 1] == 0 and tree.parents[0, 1] == 0


def test_zero_logprob_ties_keep_parents_before_children() -> None:
    """An n-gram drafter can give probability 1 (log-prob 0): a child ties its parent."""
    lp = torch.zeros((1, 4, 1), dtype=torch.float64)
    tok = torch.tensor([[[5], [6], [7], [8]]])
    tree = build_tree(
        lp, tok, torch.tensor([1]), torch.tensor([3]), torch.tensor([1]), torch.tensor([4]), 3
    )
    assert tree.tokens[0].tolist() == [1, 5, 6, 7] and tree.parents[0].tolist() == [-1, 0, 1, 2]


def test_tree_extent_counts_drafted_nodes_only() -> None:
    # Row 0: best-first over ranks 0/1 at three depths (a branching tree of 5); row 1: a chain of
    # 2 padded to the same width; row 2: the root alone.
    lp = torch.log(torch.tensor([[[0.6, 0.3], [0.5, 0.4], [0.9, 0.05]]] * 3, dtype=torch.float64))
    tok = torch.arange(18).view(3, 3, 2) + 100
    tree = build_tree(
        lp,
        tok,
        torch.tensor([1, 2, 3]),
        torch.tensor([5, 2, 0]),
        torch.tensor([2, 1, 2]),
        torch.tensor([3, 3, 3]),
        5,
    )
    depth, width = tree_extent(tree)
    want_width = [
        max(int(((tree.depths[b] == d) & tree.real[b]).sum()) for d in range(1, 4))
        for b in range(2)
    ]
    assert tree.n_nodes.tolist() == [5, 2, 0]
    assert depth.tolist() == [int(tree.depths[0].max()), 2, 0]
    assert width.tolist() == [*want_width, 0]
    assert want_width[0] >= 2 and want_width[1] == 1
