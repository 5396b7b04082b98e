"""Whether a pool's samples were drawn from the distribution they are scored under: per token,
the runtime's own uniform (`ddtree_runtime.algo.sampling.uniform`, a function of the request's
seed and the token's absolute position) must fall in the drawn token's interval of the processed
distribution rebuilt from a plain forward over prompt + sample (the runtime's
`processed_logits` and `processed_probs`, as `/score` computes them), in token-id order, the
sampler's inverse-CDF order. A token outside its interval is a sampler that did not draw from
the scored distribution (say a penalty counted over other tokens at sampling than at scoring),
which no test of the scores could tell from a faulty engine.

    python bench/scored_uniforms.py [--size 8] [--samples 8] [--pools DIR] [--oracle] POOL

POOL is a pool spec of `bench/scored_pools.py` (its file with `--size` samples, from 0).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from scored_pools import MODEL, PROMPTS, PoolSpec, chat_ids

from ddtree_runtime.algo.processors import History, chain_paths, processed_logits
from ddtree_runtime.algo.sampling import processed_probs, uniform
from ddtree_runtime.models import load_model

#: Slack on the interval's ends (the cumulative sums are float64).
SLACK = 1e-9


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pool", type=PoolSpec.parse)
    parser.add_argument("--size", type=int, default=8, help="the pool file's size")
    parser.add_argument("--samples", type=int, default=8, help="per prompt, from sample 0")
    parser.add_argument("--pools", type=Path, default=Path(".cache/scored-power"))
    parser.add_argument("--oracle", action="store_true", help="the pool drawn with --oracle")
    args = parser.parse_args()
    torch.set_num_threads(1)
    pool: PoolSpec = args.pool
    data = np.load(pool.path(args.pools, args.size, 24, 20, oracle=args.oracle))
    loaded = load_model(MODEL)
    cuts = (pool.temperature, pool.top_k, pool.top_p, pool.min_p)
    checked = outside = 0
    for i, text in enumerate(PROMPTS.values()):
        prompt = chat_ids(loaded, text)
        for k in range(args.samples):
            sample = [int(t) for t in data["token"][i, k, : data["length"][i, k]]]
            ids = torch.tensor([prompt + sample])
            logits = loaded.model(input_ids=ids, use_cache=False).logits[0].to(torch.float64)
            rows = logits[len(prompt) - 1 : len(prompt) - 1 + len(sample)]
            history = [History(pool.processors, prompt, [])]
            processed = processed_logits(rows[None], history, chain_paths(sample))[0]
            seed = pool.seed_base + 1_000_003 * i + k  # as bench/scored_pools.py seeds it
            for t, token in enumerate(sample):
                cdf = processed_probs(processed[t], *cuts).cumsum(-1)
                u = uniform(seed, len(prompt) + t) * float(cdf[-1])
                low = float(cdf[token - 1]) if token else 0.0
                checked += 1
                if not low - SLACK <= u <= float(cdf[token]) + SLACK:
                    outside += 1
                    print(f"  prompt {i} sample {k} token {t} ({token}): u {u:.6g} outside "
                          f"[{low:.6g}, {float(cdf[token]):.6g}]")  # fmt: skip
    print(f"{pool.name}: {checked} tokens, {outside} outside their interval")


if __name__ == "__main__":
    main()
