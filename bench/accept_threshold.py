"""What the lossy `accept_threshold` buys on the real model: tok/s, tau and seconds per verify
round at each threshold against AR, one process, the engines interleaved.

`sweeps/local-accept.yaml` measures the same through the server, one point per config, where a
machine's drift between points lands on the speedups. Here every engine shares one loaded model
and the repetitions alternate between them, so drift hits all alike, and every output is held at
`--max-tokens` (ignore_eos) so lengths do not differ. The prompts and temperature are the
spec's; each request has its own seed, the same across engines.

    python bench/accept_threshold.py [--spec SPEC] [--thresholds 1.0 0.5 0.2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import yaml

from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
from ddtree_runtime.models import load_model, user_turn_ids

SPEC = Path(__file__).resolve().parents[1] / "sweeps" / "local-accept.yaml"


def main() -> None:
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--spec", type=Path, default=SPEC, help="the sweep whose knobs and prompts")
    spec = yaml.safe_load(first.parse_known_args()[0].spec.read_text())
    ap = argparse.ArgumentParser(description=__doc__, parents=[first])
    grid = spec["grid"]
    ap.add_argument("--thresholds", type=float, nargs="+", default=grid["accept_threshold"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=spec["workload"]["max_tokens"])
    a = ap.parse_args()
    model = load_model(spec["runtime"]["model"])
    prompts = [user_turn_ids(model, p["text"]) for p in spec["workload"]["prompts"]]
    temperature = grid["temperature"][0]
    shape = {"budget": grid["budget"][0], "topk": grid["topk"][0]}
    shape["block_size"] = grid["block_size"][0]
    configs = {"ar": EngineConfig(speculative="none", **shape)}
    for threshold in a.thresholds:
        configs[f"t{threshold:g}"] = EngineConfig(accept_threshold=threshold, **shape)
    engines = {
        name: Engine(model, make_drafter(spec["runtime"]["draft"], model), cfg)
        for name, cfg in configs.items()
    }
    for engine in engines.values():
        engine.generate([prompts[0]], [SamplingParams(max_tokens=4)])  # warm up
    totals = {name: [0.0, 0, 0] for name in engines}  # seconds, tokens, rounds
    for rep in range(a.repeats):
        params = [
            SamplingParams(
                max_tokens=a.max_tokens,
                temperature=temperature,
                seed=1000 * rep + i,
                ignore_eos=True,
            )
            for i in range(len(prompts))
        ]
        for name, engine in engines.items():
            for prompt, param in zip(prompts, params, strict=True):
                start = time.perf_counter()
                (out,) = engine.generate([prompt], [param])
                totals[name][0] += time.perf_counter() - start
                totals[name][1] += len(out.token_ids)
                totals[name][2] += out.stats.verify_rounds
    runtime = spec["runtime"]
    print(
        f"{runtime['model']}, drafter {runtime['draft']}, {shape}, T {temperature}, "
        f"{len(prompts)} prompts x {a.repeats} repeats x {a.max_tokens} tokens, torch threads "
        f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus"
    )
    ar_tps = totals["ar"][1] / totals["ar"][0]
    header = ("engine", "tokens", "seconds", "tok/s", "tau", "ms/round", "speedup")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (7, 7, 8, 7, 5, 9, 8), strict=True)))
    for name, (seconds, tokens, rounds) in totals.items():
        tps = tokens / seconds
        print(
            f"{name:>7} {tokens:>7} {seconds:>8.1f} {tps:>7.2f} {tokens / rounds:>5.2f} "
            f"{1000 * seconds / rounds:>9.1f} {tps / ar_tps:>7.2f}x"
        )


if __name__ == "__main__":
    main()
