"""Verification walk: which tree nodes the target accepts, and the bonus token.

Each node's target choice is taken from the logits at that node (the distribution of the token after
it). A node is accepted iff it is real, its token equals its parent's choice and its parent is
accepted. Siblings carry distinct tokens, so the accepted nodes form one path from the root; the
emitted tokens are the choices along that path (the accepted tokens, then the bonus token chosen at
the deepest accepted node). Padding is never accepted whatever its token id.

`relaxed_choices` is the one lossy rule (a server's `accept_threshold` below 1, SGLang's
`threshold_single`): it changes sampled rows' choices before the walk, so the walk itself is the
same exact walk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ddtree_runtime.algo.sampling import choose, processed_probs
from ddtree_runtime.algo.tree import TreeBatch


@dataclass
class Verdict:
    choices: torch.Tensor  # [n, q] target choice at every node
    path: torch.Tensor  # [n, D+1] accepted node index per depth (0 = root), -1 past the end
    n_accepted: torch.Tensor  # [n] accepted draft nodes (path length - 1)

    def emitted(self, row: int) -> tuple[list[int], list[int]]:
        """(token ids, emitting node per token) for one request, in order."""
        nodes = self.path[row, : int(self.n_accepted[row]) + 1]
        return self.choices[row, nodes].tolist(), nodes.tolist()


@dataclass
class RowSampling:
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    uniforms: list[float] | None  # u for depth 0..D (position prefix+1+depth); None when greedy


def target_choices(logits: torch.Tensor, tree: TreeBatch, rows: list[RowSampling]) -> torch.Tensor:
    """[n, q] choice per node: argmax for greedy rows, seeded inverse-CDF sample otherwise."""
    choices = logits.argmax(dim=-1)
    for i, row in enumerate(rows):
        if row.temperature > 0:
            assert row.uniforms is not None
            u_by_depth = torch.tensor(row.uniforms, dtype=torch.float64, device=logits.device)
            u = u_by_depth[tree.depths[i].clamp(max=len(row.uniforms) - 1)]
            choices[i] = choose(logits[i], row.temperature, row.top_k, row.top_p, row.min_p, u)
    return choices


def relaxed_choices(
    logits: torch.Tensor,
    tree: TreeBatch,
    rows: list[RowSampling],
    choices: torch.Tensor,
    threshold: float,
) -> torch.Tensor:
    """`choices` with the lossy acceptance rule applied (threshold < 1; 1 returns them as they
    are): at a sampled row's node whose choice is none of its drafted children's tokens, the
    child whose token is most probable there under the row's processed distribution (`logits`
    after the request's processors, then temperature and the cuts: `processed_probs`) becomes
    the choice if that probability is at least `threshold`, so `walk` accepts it and goes on
    from it. Greedy rows keep their choices: the rule is on the sampled branch only.

    The rule is applied along the path `walk` will take, from the root down, so the processed
    distribution is computed at the at most depth + 1 nodes that path reaches, not at every
    node: a node off that path never emits, whatever its choice."""
    if threshold >= 1.0:
        return choices
    out = choices.clone()
    drafted = tree.real & (tree.depths > 0)
    for i, row in enumerate(rows):
        if row.temperature <= 0 or not bool(drafted[i].any()):
            continue
        nodes = drafted[i].nonzero()[:, 0].tolist()
        # Per parent, its drafted children: token -> node, in node order.
        children: dict[int, dict[int, int]] = {}
        for node, parent, token in zip(
            nodes, tree.parents[i, nodes].tolist(), tree.tokens[i, nodes].tolist(), strict=True
        ):
            children.setdefault(parent, {})[token] = node
        node = 0
        while node in children:
            by_token = children[node]
            choice = int(out[i, node])
            if choice not in by_token:
                probs = processed_probs(
                    logits[i, node], row.temperature, row.top_k, row.top_p, row.min_p
                )
                # The most probable drafted child at this node (the first, on a tie), where the
                # target chose none.
                choice = max(by_token, key=lambda token: float(probs[token]))
                if float(probs[choice]) < threshold:
                    break
                out[i, node] = choice
            node = by_token[choice]
    return out


def walk(tree: TreeBatch, choices: torch.Tensor) -> Verdict:
    """Accept along the tree, depth by depth (parents precede children)."""
    n, q = tree.tokens.shape
    parent = tree.parents.clamp(min=0)
    parent_choice = choices.gather(1, parent)
    candidate = tree.real & (tree.parents >= 0) & (tree.tokens == parent_choice)
    accepted = torch.zeros((n, q), dtype=torch.bool, device=choices.device)
    accepted[:, 0] = True
    max_depth = int(tree.depths.max()) if q > 1 else 0
    for d in range(1, max_depth + 1):
        at_d = candidate & (tree.depths == d) & accepted.gather(1, parent)
        accepted |= at_d
    path = torch.full((n, max_depth + 2), -1, dtype=torch.long, device=choices.device)
    nodes = torch.arange(q, device=choices.device).expand(n, q)
    # Scatter accepted nodes to their depth; rejected ones go to a spare last column.
    where = torch.where(accepted, tree.depths, max_depth + 1)
    path.scatter_(1, where, torch.where(accepted, nodes, -1))
    path = path[:, : max_depth + 1]
    return Verdict(choices=choices, path=path, n_accepted=accepted.sum(dim=1) - 1)


def unverified_choices(tree: TreeBatch, choices: torch.Tensor) -> torch.Tensor:
    """Planted fault (tests only, ``unverified_b<budget>`` in ``mask._FAULTS``): the target's
    choice at every node is replaced by its first drafted child's token, so `walk` accepts the
    first-child chain whatever the target says. Fast (deep acceptance) and wrong: the
    fast-but-wrong config a search must never return."""
    out = choices.clone()
    parents, real, tokens = tree.parents.tolist(), tree.real.tolist(), tree.tokens.tolist()
    for row, row_parents in enumerate(parents):
        seen: set[int] = set()
        for node, parent in enumerate(row_parents):
            if parent >= 0 and real[row][node] and parent not in seen:
                seen.add(parent)  # nodes follow their parents, so the first seen is first child
                out[row, parent] = tokens[row][node]
    return out


def blind_tree(tree: TreeBatch) -> TreeBatch:
    """Planted fault (tests only, ``blind_drafts`` in ``mask._FAULTS``): `walk` sees every drafted
    token as one the target never chooses (-1), so it accepts none. The output stays exact (each
    round emits the root's choice) at one token per round: a drafter that proposes nothing, the
    build problem a reference's tau catches and exactness never does."""
    drafted = tree.depths > 0
    tokens = torch.where(drafted, torch.full_like(tree.tokens, -1), tree.tokens)
    return TreeBatch(tokens, tree.parents, tree.depths, tree.real, tree.n_nodes)


HOT_DRAFT_SCALE = 1.6  # "hot_drafts": temperature factor on drafted positions
COLD_DRAFT_SCALE = 0.6  # "cold_drafts": the same, colder

#: The planted sampling faults (tests only, names in ``mask._FAULTS``, checked by the engine):
#: the sampling a sampled row's drafted positions are redrawn with (`redrawn_drafted_choices`):
#: temperature x ``HOT_DRAFT_SCALE`` / x ``COLD_DRAFT_SCALE`` (same cuts), without min-p, top-k
#: and top-p, or without min-p alone.
DRAFT_SAMPLING_FAULTS: dict[str, Callable[[RowSampling], RowSampling]] = {
    "hot_drafts": lambda row: replace(row, temperature=row.temperature * HOT_DRAFT_SCALE),
    "cold_drafts": lambda row: replace(row, temperature=row.temperature * COLD_DRAFT_SCALE),
    "untruncated_drafts": lambda row: replace(row, top_k=0, top_p=1.0, min_p=0.0),
    "min_p_drafts_ignored": lambda row: replace(row, min_p=0.0),
}


def redrawn_drafted_choices(
    logits: torch.Tensor,
    tree: TreeBatch,
    rows: list[RowSampling],
    choices: torch.Tensor,
    wrong: Callable[[RowSampling], RowSampling],
) -> torch.Tensor:
    """A planted sampling fault (tests only, `DRAFT_SAMPLING_FAULTS`): sampled rows' choices at
    real nodes of depth >= 1 are redrawn with the same uniforms under `wrong(row)`'s sampling.
    The root (depth 0), greedy rows and AR rounds (no depth >= 1 nodes) keep the target's
    choice, so only sampling on drafted positions breaks, reproducibly per seed."""
    out = choices.clone()
    for i, row in enumerate(rows):
        drafted = tree.real[i] & (tree.depths[i] >= 1)
        if row.temperature <= 0 or not bool(drafted.any()):
            continue
        assert row.uniforms is not None
        u_by_depth = torch.tensor(row.uniforms, dtype=torch.float64, device=logits.device)
        u = u_by_depth[tree.depths[i].clamp(max=len(row.uniforms) - 1)]
        w = wrong(row)
        redrawn = choose(logits[i], w.temperature, w.top_k, w.top_p, w.min_p, u)
        out[i] = torch.where(drafted, redrawn, out[i])
    return out
