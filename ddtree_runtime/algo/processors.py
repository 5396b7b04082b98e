"""A request's logits processors, applied at every tree node from the node's own ancestor path.

Before the sampler's temperature / min-p / top-k / top-p (`sampling.processed_probs`) the target's
logits at a position go through, in this order:

1. logit bias: `logit_bias[token]` added to the token's logit (OpenAI's, in [-100, 100]);
2. penalties, vLLM's convention (`apply_penalties`): the repetition penalty over the prompt and
   the output tokens (a seen token's logit divided by it when positive, multiplied when not),
   then the frequency penalty (times the token's count) and the presence penalty (once, if
   present) subtracted over the output tokens only. SGLang's repetition penalizer differs: it
   counts the output tokens only, never the prompt (its frequency and presence penalties agree).

At a tree node the *output tokens* are the tokens emitted before the round (the round's root
last, when it was emitted: in the first round the root is the prompt's last token) and the
drafted tokens on the node's own ancestor path, the node's own token included: its logits predict
the token after it, so AR at that position would have emitted them all. Siblings and other
branches never count. The counts are one scatter over each node's path (`tree_paths`), batched
over the rows that ask for a processor; rows that ask for none keep their logits untouched.
`/score` runs the same code over a chain (`chain_paths`): position i's path is the continuation's
first i tokens.

Planted faults (tests only, ``mask._FAULTS``; drafted nodes, depth >= 1, only, so AR rounds stay
exact): ``penalty_committed_only`` (the path ignored: only the tokens before the round count),
``penalty_whole_tree`` (every drafted token of the round's tree counts, siblings included),
``logit_bias_drafts_ignored`` (no logit bias on drafted nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ddtree_runtime.algo.mask import ancestor_index
from ddtree_runtime.algo.tree import TreeBatch

#: OpenAI's ranges: frequency and presence penalties, and a logit bias.
PENALTY_RANGE = (-2.0, 2.0)
BIAS_RANGE = (-100.0, 100.0)
PROCESSOR_FAULTS = frozenset(
    {"penalty_committed_only", "penalty_whole_tree", "logit_bias_drafts_ignored"}
)


@dataclass(frozen=True)
class Processors:
    """One request's processors (the defaults change nothing)."""

    repetition_penalty: float = 1.0  # > 0; 1 = off
    frequency_penalty: float = 0.0  # in PENALTY_RANGE
    presence_penalty: float = 0.0  # in PENALTY_RANGE
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias in BIAS_RANGE)

    def active(self) -> bool:
        return bool(
            self.repetition_penalty != 1.0
            or self.frequency_penalty
            or self.presence_penalty
            or self.logit_bias
        )

    def check(self, vocab_size: int) -> None:
        """ValueError (a client error) unless every value is in its range."""
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        low, high = PENALTY_RANGE
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} must be in [{low:g}, {high:g}], got {value}")
        low, high = BIAS_RANGE
        for token, bias in self.logit_bias:
            if not 0 <= token < vocab_size:
                raise ValueError(f"logit_bias token ids must be in [0, {vocab_size}), got {token}")
            if not low <= bias <= high:
                raise ValueError(f"logit_bias values must be in [{low:g}, {high:g}], got {bias}")


@dataclass(frozen=True)
class History:
    """What one row's processors read besides the round's drafted path."""

    processors: Processors
    prompt: Sequence[int]
    output: Sequence[int]  # tokens emitted before the round (module docstring)


def tree_paths(tree: TreeBatch) -> torch.Tensor:
    """[n, q, D] the drafted tokens on each node's ancestor path, the node first, then its
    parent and up to depth 1; -1 past them (the root and padding have none)."""
    ancestors = ancestor_index(tree)[:, :, :-1]  # step j is at depth - j; the root is not drafted
    steps = torch.arange(ancestors.shape[-1], device=tree.tokens.device)
    on_path = steps[None, None, :] < tree.depths[:, :, None]
    tokens = tree.tokens.gather(1, ancestors.flatten(1)).view(ancestors.shape)
    return torch.where(on_path & tree.real[:, :, None], tokens, -1)


def chain_paths(tokens: Sequence[int]) -> torch.Tensor:
    """[1, m, m - 1] for a chain of m positions (a scored continuation): position i's path is
    the first i tokens; -1 past them."""
    m = len(tokens)
    row = torch.tensor(list(tokens[:-1]), dtype=torch.long).expand(m, m - 1)
    steps = torch.arange(m - 1)
    return torch.where(steps[None, :] < torch.arange(m)[:, None], row, -1)[None]


def processed_logits(
    logits: torch.Tensor, rows: Sequence[History], paths: torch.Tensor
) -> torch.Tensor:
    """Logits [n, q, V] after each row's processors (module docstring), node j of row i reading
    `paths[i, j]` (-1: none) as its drafted output tokens. float64 where a row asks for any; the
    very `logits` when none does."""
    active = [i for i, row in enumerate(rows) if row.processors.active()]
    if not active:
        return logits
    dev = logits.device
    _, q, vocab = logits.shape
    out = logits.to(torch.float64, copy=True)
    index = torch.tensor(active, device=dev)
    part = out[index]
    counts = torch.zeros((len(active), vocab), dtype=torch.float64, device=dev)
    bias = torch.zeros((len(active), vocab), dtype=torch.float64, device=dev)
    prompt_seen = torch.zeros((len(active), vocab), dtype=torch.bool, device=dev)
    for j, i in enumerate(active):
        row = rows[i]
        output = torch.tensor(list(row.output), dtype=torch.long, device=dev)
        counts[j].index_add_(0, output, torch.ones_like(output, dtype=torch.float64))
        prompt_seen[j, torch.tensor(list(row.prompt), dtype=torch.long, device=dev)] = True
        if row.processors.logit_bias:
            tokens, values = zip(*row.processors.logit_bias, strict=True)
            bias[j, list(tokens)] = torch.tensor(values, dtype=torch.float64, device=dev)
    path = paths[index]
    counts = counts[:, None, :].expand(-1, q, -1).clone()
    counts.scatter_add_(2, path.clamp(min=0), (path >= 0).to(torch.float64))
    params = [rows[i].processors for i in active]

    def per_row(name: str) -> torch.Tensor:
        values = [getattr(p, name) for p in params]
        return torch.tensor(values, dtype=torch.float64, device=dev)[:, None, None]

    part = part + bias[:, None, :]
    present = counts > 0
    penalty = per_row("repetition_penalty")
    repeated = torch.where(part > 0, part / penalty, part * penalty)
    part = torch.where(present | prompt_seen[:, None, :], repeated, part)
    part = part - per_row("frequency_penalty") * counts
    part = part - per_row("presence_penalty") * present
    out[index] = part
    return out


def tree_logits(
    logits: torch.Tensor,
    tree: TreeBatch,
    rows: Sequence[History],
    faults: frozenset[str] = frozenset(),
) -> torch.Tensor:
    """A verify round's logits [n, q, V] processed at every node from its own path; `faults`
    (tests only: names in `PROCESSOR_FAULTS`) replace drafted nodes' with a planted wrong one.
    The very `logits` when no row asks for a processor (every fault needs one to act on)."""
    if not any(row.processors.active() for row in rows):
        return logits
    paths = tree_paths(tree)
    out = processed_logits(logits, rows, paths)
    drafted = (tree.real & (tree.depths >= 1))[:, :, None]
    if "penalty_committed_only" in faults:
        wrong = processed_logits(logits, rows, torch.full_like(paths, -1))
        out = torch.where(drafted, wrong, out)
    if "penalty_whole_tree" in faults:
        everything = torch.where(drafted[:, :, 0], tree.tokens, -1)
        whole = everything[:, None, :].expand(-1, tree.tokens.shape[1], -1)
        out = torch.where(drafted, processed_logits(logits, rows, whole), out)
    if "logit_bias_drafts_ignored" in faults:
        unbiased = [replace(r, processors=replace(r.processors, logit_bias=())) for r in rows]
        out = torch.where(drafted, processed_logits(logits, unbiased, paths), out)
    return out
