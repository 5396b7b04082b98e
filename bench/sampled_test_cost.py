"""The distribution test's own CPU cost: one two-sample test (999 reshuffles) and the power
simulation that states what it can see, on a 100-sample, 8-prompt, 64-token config (and the
default 48-sample, 4-prompt, 32-token one), sequences drawn from a small random language model
so that prefixes are shared as real samples share them.

    python bench/sampled_test_cost.py [--samples N] [--prompts P] [--tokens L]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from sweeper.proof.distribution import two_sample_test
from sweeper.proof.power import detectable_shift, pools_of

VOCAB = 64


def draw(n: int, prompts: int, tokens: int, seed: int) -> dict[str, list[list[int]]]:
    """n sequences per prompt from a first-order model with peaked (temperature 0.7) logits."""
    rng = np.random.default_rng(seed)
    logits = np.random.default_rng(1).normal(0, 3.0, size=(prompts, VOCAB + 1, VOCAB)) / 0.7
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = {}
    for p in range(prompts):
        rows = []
        for _ in range(n):
            previous, row = VOCAB, []
            for _t in range(tokens):
                previous = int(rng.choice(VOCAB, p=probs[p, previous]))
                row.append(previous)
            rows.append(row)
        out[f"p{p}"] = rows
    return out


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(n: int, prompts: int, tokens: int) -> None:
    x, y = draw(n, prompts, tokens, 2), draw(2 * n, prompts, tokens, 3)
    half = {p: rows[:n] for p, rows in y.items()}
    cpu, wall = cpu_s(), time.perf_counter()
    result = two_sample_test(x, half)
    test_cpu, test_wall = cpu_s() - cpu, time.perf_counter() - wall
    assert result is not None
    cpu, wall = cpu_s(), time.perf_counter()
    power = detectable_shift(pools_of(y), n, 0.01, basis="bench")
    power_cpu, power_wall = cpu_s() - cpu, time.perf_counter() - wall
    print(
        f"N={n} a side, {prompts} prompts x {tokens} tokens: test {test_cpu:.2f} s CPU "
        f"({test_wall:.2f} s wall, p={result.p_value:.3f}); power simulation {power_cpu:.1f} s "
        f"CPU ({power_wall:.1f} s wall, detects {power.shift})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs")
    measure(args.samples, args.prompts, args.tokens)
    measure(48, 4, 32)


if __name__ == "__main__":
    main()
