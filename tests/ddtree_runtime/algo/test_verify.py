"""The verification walk: accepted path, bonus token, and padding that is never matched."""

from __future__ import annotations

import torch

from ddtree_runtime.algo.tree import TreeBatch
from ddtree_runtime.algo.verify import RowSampling, relaxed_choices, target_choices, walk


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


def relaxed_case() -> tuple[torch.Tensor, TreeBatch, torch.Tensor]:
    """root(0)=9 with drafted children 5 (node 1) and 6 (node 2); node 1 has child 7 (node 3).
    At the root the target's probabilities are 3: 0.5, 5: 0.3, 6: 0.2 (T = 1); node 1 always
    picks 8. Logits [1, 4, 10]."""
    tree = tree_with_padding(0).narrow(4)
    logits = torch.full((1, 4, 10), float("-inf"), dtype=torch.float64)
    logits[0, 0, [3, 5, 6]] = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64).log()
    logits[0, 1:, 8] = 0.0
    return logits, tree, logits.argmax(dim=-1)


def test_accept_threshold_accepts_a_probable_draft_the_exact_rule_rejects() -> None:
    logits, tree, _ = relaxed_case()
    # u = 0.25 draws token 3 at the root (its CDF interval is [0, 0.5)): no child matches.
    sampled = [RowSampling(1.0, 0, 1.0, 0.0, [0.25, 0.25, 0.25])]
    choices = target_choices(logits, tree, sampled)
    assert choices[0, 0] == 3 and walk(tree, choices).emitted(0) == ([3], [0])
    # Both children reach 0.2; the more probable one (5, p = 0.3) is accepted, then node 1's 8.
    relaxed = relaxed_choices(logits, tree, sampled, choices, 0.2)
    assert walk(tree, relaxed).emitted(0) == ([5, 8], [0, 1])
    # Above every child's probability, and 1.0 (off): the exact rule's choices, unchanged.
    for threshold in (0.35, 1.0):
        assert torch.equal(relaxed_choices(logits, tree, sampled, choices, threshold), choices)
    # Tempered: at T = 0.5 child 5's probability is 0.09 / 0.38 = 0.24 < 0.3.
    colder = [RowSampling(0.5, 0, 1.0, 0.0, [0.25, 0.25, 0.25])]
    cold_choices = target_choices(logits, tree, colder)
    assert torch.equal(relaxed_choices(logits, tree, colder, cold_choices, 0.3), cold_choices)
    # The greedy branch ignores it: argmax 3 stays, nothing accepted.
    greedy = [RowSampling(0.0, 0, 1.0, 0.0, None)]
    greedy_choices = target_choices(logits, tree, greedy)
    assert torch.equal(relaxed_choices(logits, tree, greedy, greedy_choices, 0.2), greedy_choices)


def every_node_relaxed(
    logits: torch.Tensor, tree: TreeBatch, row: RowSampling, choices: torch.Tensor, threshold: float
) -> torch.Tensor:
    """The rule by its definition, at every node of row 0 (the reference for the path-only one)."""
    out = choices.clone()
    for parent in range(tree.tokens.shape[1]):
        kids = [
            int(c)
            for c in range(tree.tokens.shape[1])
            if bool(tree.real[0, c]) and int(tree.parents[0, c]) == parent
        ]
        tokens = [int(tree.tokens[0, c]) for c in kids]
        if not kids or int(choices[0, parent]) in tokens:
            continue
        probs = torch.softmax(logits[0, parent].double() / row.temperature, dim=-1)
        best = max(tokens, key=lambda t: float(probs[t]))
        if float(probs[best]) >= threshold:
            out[0, parent] = best
    return out


def test_the_path_only_rule_emits_what_the_every_node_rule_emits() -> None:
    """Random trees (distinct sibling tokens, a small vocabulary so children are often
    probable) at thresholds that relax some nodes and not others: the same emitted tokens."""
    gen = torch.Generator().manual_seed(0)
    vocab, q = 6, 9
    relaxed_somewhere = 0
    for case in range(200):
        parents, depths, tokens = [-1], [0], [int(torch.randint(vocab, (1,), generator=gen))]
        used: dict[int, set[int]] = {}
        for node in range(1, q):
            open_parents = [p for p in range(node) if len(used.setdefault(p, set())) < vocab]
            parent = open_parents[int(torch.randint(len(open_parents), (1,), generator=gen))]
            free = [t for t in range(vocab) if t not in used[parent]]
            token = free[int(torch.randint(len(free), (1,), generator=gen))]
            used[parent].add(token)
            parents.append(parent)
            depths.append(depths[parent] + 1)
            tokens.append(token)
        real = [True] * q
        tree = TreeBatch(
            torch.tensor([tokens]),
            torch.tensor([parents]),
            torch.tensor([depths]),
            torch.tensor([real]),
            torch.tensor([q - 1]),
        )
        logits = torch.randn((1, q, vocab), generator=gen, dtype=torch.float64) * 2
        u = torch.rand(max(depths) + 1, generator=gen, dtype=torch.float64).tolist()
        row = RowSampling(0.7, 0, 1.0, 0.0, u)
        choices = target_choices(logits, tree, [row])
        threshold = (0.15, 0.3, 0.5)[case % 3]
        ours = walk(tree, relaxed_choices(logits, tree, [row], choices, threshold)).emitted(0)
        theirs = walk(tree, every_node_relaxed(logits, tree, row, choices, threshold)).emitted(0)
        assert ours == theirs, case
        relaxed_somewhere += ours != walk(tree, choices).emitted(0)
    assert relaxed_somewhere > 20  # the rule acted in many cases, not only the trivial ones
