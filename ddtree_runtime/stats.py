"""Per-request engine statistics: speed, acceptance, and what the request was exposed to.

A verify round's stages are timed once for the whole batch (``StageClock``); every request in the
round is charged the full time of each stage, since it waited for all of it. Besides tau, a request
records its *exposure*: how many of its rounds carried padding rows (its tree smaller than the
verify width) and how many, how many ran at a fixed verify shape and how many of those under a
captured CUDA graph, how many were shared with other requests, the largest trees it verified and
the histogram of accepted lengths. A bug that only shows on one of these paths can then be traced
to it from the records. Field names are the keys of the ``ddtree`` extension field (README
"Runtime HTTP API"); ``TOTALLED`` are the ones ``/server_info`` sums over requests.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

# Timed stages of a round: "tree" covers building the trees and writing their mask, "verify" the
# target forward and the walk, "commit" the KV commit and emitting the tokens.
STAGES = ("draft", "tree", "verify", "commit")


class StageClock:
    """Seconds per stage of one verify round: ``with clock.stage("draft"): ...`` adds to it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if name not in self.seconds:
            raise KeyError(f"unknown stage {name!r}; stages are {STAGES}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start


@dataclass(frozen=True)
class RoundShape:
    """How one verify round ran; the same for every request in it."""

    verify_width: int  # query length: 1 + budget when fixed, else 1 + the batch's largest tree
    batch: int  # requests verified together
    fixed: bool  # width held at 1 + budget (cuda_graph requested), not trimmed to the trees
    cuda_graph: bool  # replayed from a captured CUDA graph


@dataclass
class RequestStats:
    verify_rounds: int = 0
    accepted_tokens: int = 0  # drafted tokens the target accepted (before stop rules cut them)
    emitted_tokens: int = 0
    tau: float = 0.0  # emitted tokens per verify round
    draft_s: float = 0.0
    tree_s: float = 0.0
    verify_s: float = 0.0
    commit_s: float = 0.0
    padded_rounds: int = 0  # rounds whose verify width exceeded 1 + this request's tree
    padding_rows: int = 0  # summed over rounds: verify width - 1 - tree nodes
    fixed_shape_rounds: int = 0  # rounds at the fixed width 1 + budget
    cuda_graph_rounds: int = 0  # of those, rounds replayed from a captured CUDA graph
    batched_rounds: int = 0  # rounds verified together with other requests
    max_tree_depth: int = 0  # deepest drafted node of any of its trees
    max_tree_width: int = 0  # most drafted nodes at one depth (1: chains only)
    max_tree_nodes: int = 0  # most drafted nodes in one tree
    max_verify_width: int = 0  # widest verify (query length) it ran in
    # accepted_hist[a]: rounds that accepted a drafted tokens (length block_size: a <= depth)
    accepted_hist: list[int] = field(default_factory=list)

    def add_round(
        self,
        seconds: Mapping[str, float],
        shape: RoundShape,
        tree_nodes: int,
        tree_depth: int,
        tree_width: int,
        accepted: int,
    ) -> None:
        """Count one verify round (after its tokens were emitted): stage times and exposure."""
        self.verify_rounds += 1
        self.draft_s += seconds["draft"]
        self.tree_s += seconds["tree"]
        self.verify_s += seconds["verify"]
        self.commit_s += seconds["commit"]
        self.accepted_tokens += accepted
        self.tau = self.emitted_tokens / self.verify_rounds
        padding = shape.verify_width - 1 - tree_nodes
        self.padded_rounds += padding > 0
        self.padding_rows += padding
        self.fixed_shape_rounds += shape.fixed
        self.cuda_graph_rounds += shape.cuda_graph
        self.batched_rounds += shape.batch > 1
        self.max_tree_depth = max(self.max_tree_depth, tree_depth)
        self.max_tree_width = max(self.max_tree_width, tree_width)
        self.max_tree_nodes = max(self.max_tree_nodes, tree_nodes)
        self.max_verify_width = max(self.max_verify_width, shape.verify_width)
        if accepted >= len(self.accepted_hist):
            self.accepted_hist.extend([0] * (accepted + 1 - len(self.accepted_hist)))
        self.accepted_hist[accepted] += 1


# Additive per-request counts: /server_info's stats sum these over finished requests.
TOTALLED = (
    "verify_rounds",
    "accepted_tokens",
    "emitted_tokens",
    "padded_rounds",
    "padding_rows",
    "fixed_shape_rounds",
    "cuda_graph_rounds",
    "batched_rounds",
)


def merged(parts: list[RequestStats]) -> RequestStats:
    """One request's `n` choices (each a sequence of its own) as one: counts and stage seconds
    summed, the largest of each `max_` field, histograms added, tau over the sums."""
    out = RequestStats()
    for part in parts:
        for name in (*TOTALLED, "draft_s", "tree_s", "verify_s", "commit_s"):
            setattr(out, name, getattr(out, name) + getattr(part, name))
        for name in ("max_tree_depth", "max_tree_width", "max_tree_nodes", "max_verify_width"):
            setattr(out, name, max(getattr(out, name), getattr(part, name)))
        hist = part.accepted_hist
        out.accepted_hist.extend([0] * (len(hist) - len(out.accepted_hist)))
        for accepted, rounds in enumerate(hist):
            out.accepted_hist[accepted] += rounds
    out.tau = out.emitted_tokens / out.verify_rounds if out.verify_rounds else 0.0
    return out
