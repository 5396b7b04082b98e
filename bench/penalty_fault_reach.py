"""Which planted penalty faults an n-gram drafter's trees can show at all: the share of random
trees whose drafted nodes' processed logits a fault changes, per penalty.

An n-gram drafter proposes only tokens of the context (prompt + output: what followed earlier
occurrences of its suffix), so every drafted token is already in the set a repetition penalty
counts (prompt and output, vLLM's convention): a fault that drops the path from that set
(`penalty_committed_only`) or adds the round's other branches (`penalty_whole_tree`) changes no
logit there, and no test of the outputs can see it. Frequency and presence penalties count the
output only, with multiplicity, so the same faults move them. Random trees (a chain and a
branch, drafted tokens drawn from the context), random logits, the runtime's `tree_logits`.

    python bench/penalty_fault_reach.py [--trees 200]
"""

from __future__ import annotations

import argparse

import torch

from ddtree_runtime.algo.processors import History, Processors, tree_logits
from ddtree_runtime.algo.tree import TreeBatch

VOCAB = 64
#: Root, a chain of 4 and a branch of 4 under node 1.
PARENTS = [-1, 0, 1, 2, 3, 1, 5, 6, 7]
DEPTHS = [0, 1, 2, 3, 4, 2, 3, 4, 5]
PENALTIES = {
    "repetition 1.3": Processors(repetition_penalty=1.3),
    "frequency 0.5": Processors(frequency_penalty=0.5),
    "presence 0.5": Processors(presence_penalty=0.5),
}
FAULTS = ("penalty_committed_only", "penalty_whole_tree")


def changed(processors: Processors, fault: str, trees: int, seed: int = 0) -> int:
    """How many of `trees` random context-drafted trees `fault` changes any logit of."""
    g = torch.Generator().manual_seed(seed)
    n = len(PARENTS)
    found = 0
    for _ in range(trees):
        prompt = torch.randint(0, VOCAB, (12,), generator=g).tolist()
        output = torch.randint(0, VOCAB, (6,), generator=g).tolist()
        context = prompt + output
        tokens = [context[i] for i in torch.randint(0, len(context), (n,), generator=g).tolist()]
        tree = TreeBatch(
            torch.tensor([tokens]),
            torch.tensor([PARENTS]),
            torch.tensor([DEPTHS]),
            torch.ones(1, n, dtype=torch.bool),
            torch.tensor([n - 1]),
        )
        logits = torch.randn(1, n, VOCAB, generator=g, dtype=torch.float64) * 3
        rows = [History(processors, prompt, output)]
        right = tree_logits(logits, tree, rows)
        found += not torch.equal(right, tree_logits(logits, tree, rows, frozenset({fault})))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=200)
    args = parser.parse_args()
    print("| penalty | " + " | ".join(f"`{f}`" for f in FAULTS) + " |")
    print("| --- |" + " --- |" * len(FAULTS))
    for name, processors in PENALTIES.items():
        cells = [f"{changed(processors, f, args.trees)} of {args.trees}" for f in FAULTS]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
