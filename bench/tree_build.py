"""Tree build + mask per verify step: batched tensor version vs a plain per-request heap.

Both build the same best-first trees (tests/ddtree_runtime/test_tree.py checks equality) and write
the same mask rows; both run in this process on the same inputs, so the ratio is a same-run figure.

    python bench/tree_build.py [--repeats N] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from ddtree_runtime.algo.mask import fill_tree_mask
from ddtree_runtime.algo.tree import build_tree, build_tree_reference

DEPTH = 15  # block size 16
PREFIX = 128


def drafts(batch: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lp = torch.rand(batch, DEPTH, k, generator=g, dtype=torch.float64).log()
    lp = lp.sort(dim=-1, descending=True).values.float()
    tok = torch.randint(0, 49152, (batch, DEPTH, k), generator=g)
    return lp, tok


def vectorized(lp, tok, budget, topk, mask, positions) -> None:
    batch = lp.shape[0]
    tree = build_tree(
        lp,
        tok,
        torch.zeros(batch, dtype=torch.long),
        torch.full((batch,), budget),
        torch.full((batch,), topk),
        torch.full((batch,), DEPTH),
        budget,
    )
    fill_tree_mask(mask, positions, tree, torch.full((batch,), PREFIX))


def per_request(lp, tok, budget, topk, mask, positions) -> None:
    """DDTree's heap per request, then each mask row written from its ancestor list."""
    q = budget + 1
    for b in range(lp.shape[0]):
        nodes = build_tree_reference(lp[b].tolist(), tok[b].tolist(), budget, topk, DEPTH)
        parents = [-1] + [p for _, p, _ in nodes]
        depths = [0] + [d for _, _, d in nodes]
        mask[b].fill_(float("-inf"))
        for j in range(q):
            row = mask[b, 0, j]
            if j < len(parents):
                row[:PREFIX] = 0.0
                node = j
                while node >= 0:
                    row[PREFIX + node] = 0.0
                    node = parents[node]
                positions[b, j] = PREFIX + depths[j]
            else:
                row[PREFIX + j] = 0.0
                positions[b, j] = PREFIX


def timed(fn, repeats: int, *args) -> float:
    fn(*args)  # warm up
    start = time.perf_counter()
    for _ in range(repeats):
        fn(*args)
    return (time.perf_counter() - start) / repeats * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(
        f"tree build + mask, depth {DEPTH}, prefix {PREFIX}, {a.threads} thread(s), us per step; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus"
    )
    print(
        f"{'batch':>5} {'budget':>6} {'topk':>4} {'batched_us':>11} {'heap_us':>10} {'speedup':>8}"
    )
    for batch in (1, 16, 64):
        for budget in (16, 64):
            for topk in (1, 4, 8):
                lp, tok = drafts(batch, topk, seed=batch * 1000 + budget + topk)
                kv = PREFIX + budget + 1 + 63
                mask = torch.zeros((batch, 1, budget + 1, kv))
                positions = torch.zeros((batch, budget + 1), dtype=torch.long)
                args = (lp, tok, budget, topk, mask, positions)
                fast = timed(vectorized, a.repeats, *args)
                slow = timed(per_request, max(1, a.repeats // 2), *args)
                print(
                    f"{batch:>5} {budget:>6} {topk:>4} {fast:>11.0f} {slow:>10.0f} "
                    f"{slow / fast:>7.1f}x"
                )


if __name__ == "__main__":
    main()
