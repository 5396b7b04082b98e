"""``python -m ddtree_runtime selftest``: is DDTree greedy token-identical to AR greedy here?

For every (budget, topk, block size) it runs the built-in (or given) prompts through the Engine in
batches with different per-request tree sizes (padding always active) and compares token ids with
an independent plain Hugging Face greedy loop. Exit 0 only if every config is exact; 1 if one is
not; 2 with one line on stderr for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers and explain why they are prime.",
    "Explain what a hash table is in two sentences.",
    "Count from one to ten in words.",
    "Translate 'good morning' into Spanish and German.",
    "Give me a short recipe for pancakes.",
    "Why is the sky blue?",
]


class BadInput(Exception):
    """Reported as one line on stderr with exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadInput(message)


@dataclass
class ConfigResult:
    budget: int
    topk: int
    block_size: int
    exact: bool
    first_divergence: dict | None
    tau: float
    seconds: float


def _int_list(text: str, name: str, minimum: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise BadInput(f"--{name}: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise BadInput(f"--{name}: empty list")
    bad = [v for v in values if v < minimum]
    if bad:
        raise BadInput(f"--{name}: {bad[0]} is below the minimum {minimum}")
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = _Parser(prog="ddtree_runtime selftest", description=__doc__)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--budgets", default="1,4,16")
    p.add_argument("--topk", default="1,4")
    p.add_argument("--block-size", default="4,8")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompts", type=Path, default=None, help="text file, one prompt per line")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--json", action="store_true")
    p.add_argument("--dtype", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--draft", choices=["ngram", "oracle"], default="ngram")
    a = p.parse_args(argv)
    a.budgets = _int_list(a.budgets, "budgets", 0)
    a.topk = _int_list(a.topk, "topk", 1)
    a.block_size = _int_list(a.block_size, "block-size", 2)
    if a.batch < 1:
        raise BadInput(f"--batch: must be >= 1, got {a.batch}")
    if a.max_new_tokens < 1:
        raise BadInput(f"--max-new-tokens: must be >= 1, got {a.max_new_tokens}")
    if a.dtype is not None and a.dtype not in ("float32", "bfloat16", "float16", "float64"):
        raise BadInput(f"--dtype: unknown dtype {a.dtype!r}")
    return a


def load_prompts(path: Path | None) -> list[str]:
    if path is None:
        return PROMPTS
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    except OSError as e:
        raise BadInput(f"--prompts: cannot read {path}: {e.strerror}") from None
    prompts = [ln for ln in lines if ln]
    if not prompts:
        raise BadInput(f"--prompts: {path} has no prompts")
    return prompts


def run(a: argparse.Namespace) -> list[ConfigResult]:
    from ddtree_runtime.drafters import make_drafter
    from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
    from ddtree_runtime.models import ModelNotFound, load_model, user_turn_ids
    from ddtree_runtime.reference import divergence_index, greedy_reference

    try:
        loaded = load_model(a.model, dtype=a.dtype, device=a.device)
    except (ModelNotFound, OSError, ValueError) as e:
        raise BadInput(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    prompts = [user_turn_ids(loaded, text) for text in load_prompts(a.prompts)]
    refs = [
        greedy_reference(loaded.model, p, a.max_new_tokens, loaded.eos_token_ids) for p in prompts
    ]
    max_len = max(len(p) for p in prompts) + a.max_new_tokens + 1
    results = []
    for budget in a.budgets:
        for topk in a.topk:
            for block_size in a.block_size:
                if a.draft == "oracle":
                    full = [p + r for p, r in zip(prompts, refs, strict=True)]
                    drafter = make_drafter("oracle", loaded, references=full)
                else:
                    drafter = make_drafter("ngram", loaded)
                cfg = EngineConfig(
                    budget=budget,
                    topk=topk,
                    block_size=block_size,
                    max_batch=a.batch,
                    max_model_len=max_len,
                )
                engine = Engine(loaded, drafter, cfg)
                # Different per-request tree sizes in one batch keep padding active.
                sizes = [budget, budget // 2, max(budget - 1, 0)]
                params = [
                    SamplingParams(max_tokens=a.max_new_tokens, budget=sizes[i % 3])
                    for i in range(len(prompts))
                ]
                start = time.perf_counter()
                outs = engine.generate(prompts, params)
                seconds = time.perf_counter() - start
                divergence = None
                for i, (o, want) in enumerate(zip(outs, refs, strict=True)):
                    if o.token_ids != want:
                        j = divergence_index(o.token_ids, want)
                        assert j is not None
                        divergence = {
                            "prompt": i,
                            "index": j,
                            "got": o.token_ids[j : j + 5],
                            "want": want[j : j + 5],
                        }
                        break
                rounds = sum(o.stats.verify_rounds for o in outs)
                emitted = sum(o.stats.emitted_tokens for o in outs)
                results.append(
                    ConfigResult(
                        budget,
                        topk,
                        block_size,
                        divergence is None,
                        divergence,
                        emitted / max(rounds, 1),
                        seconds,
                    )
                )
    return results


def main(argv: list[str] | None = None) -> int:
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        results = run(a)
    except BadInput as e:
        print(f"selftest: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(
            json.dumps(
                {
                    "model": a.model,
                    "exact": all(r.exact for r in results),
                    "configs": [asdict(r) for r in results],
                }
            )
        )
    else:
        for r in results:
            verdict = "exact" if r.exact else f"DIVERGED {r.first_divergence}"
            print(
                f"budget={r.budget:<3} topk={r.topk:<2} block_size={r.block_size:<3} "
                f"tau={r.tau:.2f} {r.seconds:6.1f}s  {verdict}"
            )
        print("ALL EXACT" if all(r.exact for r in results) else "NOT EXACT")
    return 0 if all(r.exact for r in results) else 1
