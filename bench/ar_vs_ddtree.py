"""Tokens/s of plain AR vs DDTree (n-gram drafter) on the real model, same prompts, one run.

Both go through the same Engine (AR = speculative "none"), greedy, over the selftest's built-in
prompts in the model's chat template; outputs are checked to be token-identical.

    python bench/ar_vs_ddtree.py [--model smollm2-135m] [--max-new-tokens 64] [--batch 1]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
from ddtree_runtime.models import load_model, user_turn_ids
from ddtree_runtime.selftest import PROMPTS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--topk", type=int, default=4)
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    m = load_model(a.model)
    prompts = [user_turn_ids(m, text) for text in PROMPTS]
    params = [SamplingParams(max_tokens=a.max_new_tokens) for _ in prompts]
    rows = {}
    for name, spec in (("ar", "none"), ("ddtree", "ddtree")):
        cfg = EngineConfig(
            speculative=spec,
            budget=a.budget,
            topk=a.topk,
            block_size=a.block_size,
            max_batch=a.batch,
        )
        engine = Engine(m, make_drafter("ngram", m), cfg)
        engine.generate([prompts[0]], [SamplingParams(max_tokens=4)])  # warm up
        start = time.perf_counter()
        outs = engine.generate(prompts, params)
        seconds = time.perf_counter() - start
        tokens = sum(len(o.token_ids) for o in outs)
        rounds = sum(o.stats.verify_rounds for o in outs)
        rows[name] = (outs, tokens / seconds, tokens / rounds, seconds, tokens)
    same = [o.token_ids for o in rows["ar"][0]] == [o.token_ids for o in rows["ddtree"][0]]
    print(
        f"model {a.model}, {len(prompts)} prompts, max_new_tokens {a.max_new_tokens}, "
        f"batch {a.batch}, budget {a.budget}, topk {a.topk}, block_size {a.block_size}, "
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cpus"
    )
    print(f"{'engine':>7} {'tokens':>7} {'seconds':>8} {'tok/s':>7} {'tau':>5}")
    for name, (_, tps, tau, seconds, tokens) in rows.items():
        print(f"{name:>7} {tokens:>7} {seconds:>8.1f} {tps:>7.2f} {tau:>5.2f}")
    print(f"speedup {rows['ddtree'][1] / rows['ar'][1]:.2f}x; outputs identical: {same}")


if __name__ == "__main__":
    main()
