"""Shared test material for the engine tests: the float64 tiny-random target, prompts, references.

float64 removes numerical near-ties, so these tests check the algorithm exactly; fp32 exactness on
the real model is the selftest's job.
"""

from __future__ import annotations

import functools

import torch

from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, GenerationResult, SamplingParams
from ddtree_runtime.models import LoadedModel, load_model
from ddtree_runtime.reference import divergence_index, greedy_reference

PROMPTS = [
    "Hello there, how are you?",
    "abcabcabc",
    "The quick brown fox",
    "x",
    "def f(x): return x*x",
    "1, 2, 3, 4, 5,",
    "Once upon a time",
    "zzzz",
]
NEW_TOKENS = 48

torch.set_num_threads(1)  # 2 shared cores: more threads only oversubscribe


@functools.lru_cache(maxsize=2)
def tiny(dtype: str = "float64") -> LoadedModel:
    return load_model("tiny-random", dtype=dtype)


@functools.lru_cache(maxsize=1)
def smollm2() -> LoadedModel:
    """The real small model (float32), loaded once per test process."""
    return load_model("smollm2-135m")


@functools.lru_cache(maxsize=2)
def prompts_and_refs(dtype: str = "float64") -> tuple[list[list[int]], list[list[int]]]:
    m = tiny(dtype)
    prompts = [m.tokenizer.encode(p) for p in PROMPTS]
    refs = [greedy_reference(m.model, p, NEW_TOKENS, m.eos_token_ids) for p in prompts]
    return prompts, refs


@functools.lru_cache(maxsize=2)
def long_refs(extra: int = 16) -> list[list[int]]:
    """prompt + greedy continuation that ignores EOS (so drafts can run past an EOS)."""
    m = tiny()
    prompts, _ = prompts_and_refs()
    return [p + greedy_reference(m.model, p, NEW_TOKENS + extra, []) for p in prompts]


def oracle_engine(
    budget: int,
    topk: int,
    block_size: int,
    max_batch: int = 4,
    cuda_graph: bool = False,
    **noise: float,
) -> Engine:
    """An engine drafting from the known continuation (``cuda_graph``: fixed verify width)."""
    m = tiny()
    drafter = make_drafter("oracle", m, references=long_refs(), **noise)
    cfg = EngineConfig(
        budget=budget,
        topk=topk,
        block_size=block_size,
        max_batch=max_batch,
        cuda_graph=cuda_graph,
    )
    return Engine(m, drafter, cfg)


def mixed_budgets(budget: int, n: int) -> list[int]:
    """Different tree sizes in one batch so padding is always active (budget 0 included)."""
    pattern = [budget, max(budget // 2, 1), 0, max(budget - 1, 1)]
    return [pattern[i % len(pattern)] for i in range(n)]


def run_greedy(
    engine: Engine, budgets: list[int], max_tokens: int = NEW_TOKENS
) -> list[GenerationResult]:
    prompts, _ = prompts_and_refs()
    params = [SamplingParams(max_tokens=max_tokens, budget=b) for b in budgets]
    return engine.generate(prompts, params)


def first_divergence(got: list[list[int]], want: list[list[int]]) -> str | None:
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        j = divergence_index(g, w)
        if j is not None:
            return f"prompt {i} index {j}: got {g[j : j + 4]} want {w[j : j + 4]}"
    return None
