"""A request's logits processors at every tree node, against a literal reading of the convention
(vLLM's): logit bias, then the repetition penalty over the prompt and the output tokens, then
frequency and presence penalties over the output tokens only; a node's output tokens are those
emitted before the round and the drafted tokens on its own ancestor path, itself included. The
planted faults move drafted nodes (depth >= 1) only."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from ddtree_runtime.algo.processors import (
    PROCESSOR_FAULTS,
    History,
    Processors,
    chain_paths,
    processed_logits,
    tree_logits,
    tree_paths,
)
from ddtree_runtime.algo.tree import TreeBatch

VOCAB = 8
PROCESSORS = Processors(
    repetition_penalty=1.3,
    frequency_penalty=0.5,
    presence_penalty=0.25,
    logit_bias=((2, 1.5), (6, -100.0)),
)
PROMPT, OUTPUT = [1, 3], [4, 3]  # the root (3) was emitted last round


def literal(row: list[float], processors: Processors, prompt: list[int], output: list[int]):
    """One row processed by reading the convention word for word (no shared code)."""
    row = list(row)
    for token, bias in processors.logit_bias:
        row[token] += bias
    seen = set(prompt) | set(output)
    counts = Counter(output)
    for t in range(len(row)):
        if t in seen:
            rp = processors.repetition_penalty
            row[t] = row[t] / rp if row[t] > 0 else row[t] * rp
        row[t] -= processors.frequency_penalty * counts[t]
        row[t] -= processors.presence_penalty * (counts[t] > 0)
    return row


def hand_tree() -> TreeBatch:
    # root(0)=3 -> 1:5 -> 3:5 -> 4:7 ; root -> 2:2 ; node 5 is padding
    tokens = torch.tensor([[3, 5, 2, 5, 7, 0]])
    parents = torch.tensor([[-1, 0, 0, 1, 3, -1]])
    depths = torch.tensor([[0, 1, 1, 2, 3, 0]])
    real = torch.tensor([[True, True, True, True, True, False]])
    return TreeBatch(tokens, parents, depths, real, torch.tensor([4]))


PATHS = {0: [], 1: [5], 2: [2], 3: [5, 5], 4: [5, 5, 7]}  # node -> drafted tokens on its path


def raw_logits() -> torch.Tensor:
    return torch.randn(1, 6, VOCAB, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def test_each_node_is_processed_from_its_own_path() -> None:
    logits = raw_logits()
    got = tree_logits(logits, hand_tree(), [History(PROCESSORS, PROMPT, OUTPUT)])
    for node, path in PATHS.items():
        want = literal(logits[0, node].tolist(), PROCESSORS, PROMPT, OUTPUT + path)
        assert got[0, node].tolist() == pytest.approx(want, abs=1e-12), node


def test_a_request_without_processors_keeps_its_logits() -> None:
    logits = raw_logits().float()
    rows = [History(Processors(), PROMPT, OUTPUT)]
    assert tree_logits(logits, hand_tree(), rows) is logits


def test_chain_paths_are_each_positions_prefix() -> None:
    assert chain_paths([7, 8, 9]).tolist() == [[[-1, -1], [7, -1], [7, 8]]]
    assert tree_paths(hand_tree())[0, 4].tolist() == [7, 5, 5]
    logits = raw_logits()[:, :3]
    got = processed_logits(logits, [History(PROCESSORS, PROMPT, [])], chain_paths([5, 5, 7]))
    for i, prefix in enumerate([[], [5], [5, 5]]):
        want = literal(logits[0, i].tolist(), PROCESSORS, PROMPT, prefix)
        assert got[0, i].tolist() == pytest.approx(want, abs=1e-12)


#: Per planted fault, what a drafted node (depth >= 1) wrongly reads: its processors and output.
WRONG = {
    "penalty_committed_only": lambda node: (PROCESSORS, OUTPUT),
    "penalty_whole_tree": lambda node: (PROCESSORS, OUTPUT + [5, 2, 5, 7]),
    "logit_bias_drafts_ignored": lambda node: (
        Processors(1.3, 0.5, 0.25, ()),
        OUTPUT + PATHS[node],
    ),
}


@pytest.mark.parametrize("fault", sorted(WRONG))
def test_planted_faults_move_drafted_nodes_only(fault: str) -> None:
    assert fault in PROCESSOR_FAULTS
    logits = raw_logits()
    rows = [History(PROCESSORS, PROMPT, OUTPUT)]
    got = tree_logits(logits, hand_tree(), rows, frozenset({fault}))
    clean = tree_logits(logits, hand_tree(), rows)
    assert torch.equal(got[0, 0], clean[0, 0])  # the root: as AR
    for node in range(1, 5):
        processors, output = WRONG[fault](node)
        want = literal(logits[0, node].tolist(), processors, PROMPT, output)
        assert got[0, node].tolist() == pytest.approx(want, abs=1e-12), node
    assert not torch.equal(got[0, 1:5], clean[0, 1:5])


def test_bad_processors_are_refused() -> None:
    for bad, match in [
        (Processors(repetition_penalty=0.0), "repetition_penalty"),
        (Processors(frequency_penalty=2.5), "frequency_penalty"),
        (Processors(presence_penalty=-2.01), "presence_penalty"),
        (Processors(logit_bias=((3, 100.5),)), "logit_bias"),
        (Processors(logit_bias=((VOCAB, 1.0),)), "logit_bias"),
    ]:
        with pytest.raises(ValueError, match=match):
            bad.check(VOCAB)
    PROCESSORS.check(VOCAB)
