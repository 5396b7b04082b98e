"""Pools of seeded samples from the bundled runtime, in process, each scored by the target's own
prefill: the material of the scored test's power table (`bench/scored_power.py`).

A pool is one engine setting (AR, or DDTree b16 k4 with n-gram drafts, with or without a planted
fault on its drafted positions) at one sampling setting, `--size` samples per prompt of
`--tokens` tokens, each with its own seed. Every sample is then scored as the runtime's exact
route scores it (one plain forward over prompt + sample; per token its raw logprob and rank,
its processed probability `p` under the runtime's own `processed_probs`, the processed mass
`above` it, and `gap` and `boundary` where p is 0, as `ddtree_runtime.score` gives them), and
the raw top `--top` logprobs per position, what an engine that returns only its top k would give
(the `topk` basis). Pools are cached as .npz in `--out` (default .cache/scored-power/), keyed
by their settings.

    python bench/scored_pools.py [--size 192] [--first 0] [--tokens 24] [--batch 32] [--out DIR]
        [--oracle AR_POOL] POOL...

`--oracle AR_POOL` (a pool file of this script's, drawn by the AR engine; repeated, its parts)
drafts with `CorpusDrafter` over its samples instead of n-grams of the context (the key gets
`-oracle`): a bench condition, the target's own samples as the drafter's corpus, so drafts are
accepted where n-gram drafts are not (under a repetition penalty 1.3 a context token is rarely
drawn again, so n-gram drafts are rarely accepted and a fault on drafted nodes rarely acts).

`--first K` draws samples K to K + size - 1 (their seeds), to a file of its own (`-fromK`): a
pool drawn in parts, by processes side by side; `bench/scored_power.py` joins a pool's parts.

POOL is `name:fault:temperature:top_p:seed_base[:top_k[:min_p]][:PROCESSOR...]`, e.g.
`ar:none:0.7:1.0:0` or `hot:hot_drafts:0.7:1.0:500000000` (top-k and min-p 0, off, unless
given: `ark:none:0.7:1.0:0:20`, `armp:none:0.7:1.0:0:0:0.1`); fault `none` for a correct engine
(else one of the runtime's planted sampling or processor faults), `ar` in the name for budget 0.
PROCESSOR parts, after the cuts, are the request's logit processors (`algo.processors`; the
request-config id parts): `rp1.3` (repetition penalty), `fp0.5` / `pp0.5` (frequency / presence
penalty), `lb28=-5` (logit bias -5 on token 28; one part per token), e.g.
`fpc:penalty_committed_only:0.7:1.0:1200000000:0:0:fp0.5`. The scores are the runtime's
`/score`'s (`score.score_rows` over `processors.processed_logits` from each position's own
prefix, as `score_continuation`), with the raw logits' log-sum-exp beside the raw logprobs,
rank and top: what the judge rebuilds a repetition penalty from.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ddtree_runtime.algo import mask
from ddtree_runtime.algo.processors import (
    PROCESSOR_FAULTS,
    History,
    Processors,
    chain_paths,
    processed_logits,
)
from ddtree_runtime.algo.verify import DRAFT_SAMPLING_FAULTS
from ddtree_runtime.drafters import Drafter, make_drafter
from ddtree_runtime.drafters.base import empty_proposal
from ddtree_runtime.engine import Engine
from ddtree_runtime.models import LoadedModel, load_model
from ddtree_runtime.params import EngineConfig, SamplingParams
from ddtree_runtime.score import score_rows
from sweeper.config.features import FEATURES

#: The prompts of sweeps/local-sampled.yaml (its chat workload), which the distribution test's
#: power table was measured on.
PROMPTS = {
    "poem": "Write a short poem about the sea with the refrain 'the tide comes in, the tide goes "
    "out'.",
    "quicksort": "Write a Python function quicksort(items) that returns a sorted list.",
    "repeat-list": "Repeat this list exactly, one item per line: apple, banana, cherry, apple, "
    "banana, cherry.",
    "count": "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
}
MODEL = "smollm2-135m"
#: The planted faults a pool may name: the sampling ones and the processor ones.
FAULTS = frozenset(DRAFT_SAMPLING_FAULTS) | PROCESSOR_FAULTS


#: The processor parts of a pool spec (module docstring): prefix -> `Processors` field, the
#: penalties' id parts as the sweeper's feature table spells them.
PROCESSOR_PARTS = {f.prefix: f.name for f in FEATURES if f.family == "penalties"}


@dataclass(frozen=True)
class PoolSpec:
    name: str
    fault: str
    temperature: float
    top_p: float
    seed_base: int
    top_k: int = 0
    min_p: float = 0.0
    processors: Processors = Processors()

    @classmethod
    def parse(cls, text: str) -> PoolSpec:
        name, fault, temperature, top_p, seed_base, *rest = text.split(":")
        cuts = [part for part in rest if not part[:1].isalpha()]
        named = rest[len(cuts) :]
        if len(cuts) > 2 or any(not part[:1].isalpha() for part in named):
            raise ValueError(f"pool {text!r}: at most top_k and min_p, then processor parts")
        k = int(cuts[0]) if cuts else 0
        min_p = float(cuts[1]) if len(cuts) > 1 else 0.0
        values: dict[str, float] = {}
        bias: list[tuple[int, float]] = []
        for part in named:
            if part.startswith("lb"):
                token, value = part[2:].split("=")
                bias.append((int(token), float(value)))
            elif part[:2] in PROCESSOR_PARTS:
                values[PROCESSOR_PARTS[part[:2]]] = float(part[2:])
            else:
                raise ValueError(f"pool {text!r}: unknown processor part {part!r}")
        processors = Processors(**values, logit_bias=tuple(sorted(bias)))
        spec = cls(name, fault, float(temperature), float(top_p), int(seed_base), k, min_p)
        return replace(spec, processors=processors)

    def path(
        self, out: Path, size: int, tokens: int, top: int, first: int = 0, oracle: bool = False
    ) -> Path:
        key = f"{self.name}-{self.fault}-t{self.temperature}-p{self.top_p}-s{self.seed_base}"
        key += f"-tk{self.top_k}" if self.top_k else ""
        key += f"-mp{self.min_p}" if self.min_p else ""
        key += "".join(f"-{part}" for part in self.processor_parts())
        key += "-oracle" if oracle else ""
        key += f"-from{first}" if first else ""
        return out / f"{key}-n{size}-l{tokens}-k{top}.npz"

    def processor_parts(self) -> list[str]:
        """The spec's processor parts (module docstring), as `parse` reads them."""
        parts = [
            f"{prefix}{getattr(self.processors, field)}"
            for prefix, field in PROCESSOR_PARTS.items()
            if getattr(self.processors, field) != getattr(Processors(), field)
        ]
        return parts + [f"lb{token}={bias}" for token, bias in self.processors.logit_bias]


class CorpusDrafter:
    """Bench only: drafts what followed the context's suffix in a corpus of the target's own
    samples (prompt + sample). Per depth, the followers of the longest suffix (of `LENGTHS`
    tokens) that occurs in the corpus are counted, as the n-gram drafter counts them in the
    context, and shorter suffixes fill the k candidates the longer ones leave (ranked below them).
    The samples are the target's, drawn under the request's sampling settings and processors, so
    its drafts are what the target draws; when the corpus holds the AR sample drawn under the same
    seed, a correct engine's context is a prefix of it and the drafts are that sample's next
    tokens (the runtime's sampler is coupled by seed): a fault on drafted nodes acts wherever
    it can, until it changes a token."""

    name = "corpus"
    #: The suffix lengths looked up, longest first (a 32-token suffix pins the prompt and most
    #: of the sample: the continuations of samples that drew the same tokens so far).
    LENGTHS = (32, 24, 16, 12, 8, 6, 4, 3, 2, 1)

    def __init__(self, corpus: list[list[int]]) -> None:
        self.index: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        self.corpus = corpus
        for c, seq in enumerate(corpus):
            for j in range(1, len(seq)):
                for n in self.LENGTHS:
                    if n <= j:
                        self.index.setdefault(tuple(seq[j - n : j]), []).append((c, j))

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lps, toks = empty_proposal(len(contexts), depth, k)
        for b, ctx in enumerate(contexts):
            levels = [self.index.get(tuple(ctx[-n:]), []) for n in self.LENGTHS if n <= len(ctx)]
            for i in range(depth):
                ranked: list[tuple[int, float]] = []
                for found in levels:
                    seqs = [(self.corpus[c], j + i) for c, j in found]
                    follow = Counter(seq[at] for seq, at in seqs if at < len(seq))
                    floor = ranked[-1][1] - 1.0 if ranked else 0.0
                    total = sum(follow.values())
                    seen = {tok for tok, _ in ranked}
                    ranked += [
                        (tok, floor + math.log(count / total))
                        for tok, count in follow.most_common()
                        if tok not in seen
                    ]
                    if len(ranked) >= k:
                        break
                for r, (tok, score) in enumerate(ranked[:k]):
                    lps[b, i, r] = score
                    toks[b, i, r] = tok
        return lps, toks


def corpus(paths: list[Path]) -> list[list[int]]:
    """AR pools' samples, each after its prompt's ids: the `CorpusDrafter`'s corpus."""
    return [sample for path in paths for sample in samples_of(np.load(path))]


def samples_of(data: Any) -> list[list[int]]:
    """A pool file's samples (its `np.load`), each after its prompt's ids."""
    return [
        [int(t) for t in data["prompt_ids"][i] if t >= 0]
        + [int(t) for t in data["token"][i, s, : data["length"][i, s]]]
        for i in range(data["token"].shape[0])
        for s in range(data["token"].shape[1])
    ]


def chat_ids(loaded: LoadedModel, text: str) -> list[int]:
    """The prompt ids the runtime's chat route sends (its chat template)."""
    rendered = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return list(loaded.tokenizer.encode(rendered, add_special_tokens=False))


def generate(
    loaded: LoadedModel,
    pool: PoolSpec,
    prompts: list[list[int]],
    samples: range,
    tokens: int,
    batch: int,
    drafter: Drafter,
) -> list[list[list[int]]]:
    """[prompt][sample] token ids, seeded per sample, every prompt's samples in one batch."""
    ar = pool.name.startswith("ar")
    config = EngineConfig(
        speculative="none" if ar else "ddtree",
        budget=0 if ar else 16,
        topk=4,
        block_size=8,
        max_batch=batch,
        max_model_len=max(len(p) for p in prompts) + tokens + 32,
    )
    engine = Engine(loaded, drafter, config)
    requests = [(i, k) for k in samples for i in range(len(prompts))]
    params = [
        SamplingParams(
            max_tokens=tokens,
            temperature=pool.temperature,
            top_p=pool.top_p,
            top_k=pool.top_k,
            min_p=pool.min_p,
            repetition_penalty=pool.processors.repetition_penalty,
            frequency_penalty=pool.processors.frequency_penalty,
            presence_penalty=pool.processors.presence_penalty,
            logit_bias=dict(pool.processors.logit_bias),
            seed=pool.seed_base + 1_000_003 * i + k,
        )
        for i, k in requests
    ]
    if pool.fault != "none":
        if pool.fault not in FAULTS:  # an unknown name would plant nothing: a correct pool
            raise ValueError(f"fault {pool.fault!r}: not one of {sorted(FAULTS)}")
        mask._FAULTS.add(pool.fault)
    try:
        results = engine.generate([prompts[i] for i, _ in requests], params)
    finally:
        mask._FAULTS.discard(pool.fault)
    out: list[list[list[int]]] = [[] for _ in prompts]
    for (i, _), result in zip(requests, results, strict=True):
        out[i].append(result.token_ids)
    rounds = sum(r.stats.verify_rounds or 0 for r in results)
    drawn = sum(len(r.token_ids) for r in results)
    print(f"  {drawn} tokens in {rounds} rounds (tau {drawn / max(rounds, 1):.2f})", flush=True)
    return out


@torch.inference_mode()
def score(
    loaded: LoadedModel,
    prompt: list[int],
    samples: list[list[int]],
    pool: PoolSpec,
    tokens: int,
    top: int,
) -> dict[str, np.ndarray]:
    """Per sample and position (padded to `tokens`, `length` says how many are real): the
    runtime's `/score` fields (`score_rows` over its processed logits, as `score_continuation`
    computes them, forwards batched 8 samples at a time), the raw logits' log-sum-exp, and the
    raw top `top` (on both bases)."""
    s = len(samples)
    out = {
        name: np.full((s, tokens), np.nan)
        for name in ("logprob", "p", "above", "gap", "boundary", "rank", "logsumexp")
    }
    out["token"] = np.full((s, tokens), -1, dtype=np.int64)
    out["top_ids"] = np.zeros((s, tokens, top), dtype=np.int64)
    out["top_lp"] = np.zeros((s, tokens, top))
    out["length"] = np.array([len(x) for x in samples])
    history = [History(pool.processors, prompt, [])]
    cuts = (pool.temperature, pool.top_k, pool.top_p, pool.min_p)
    for start in range(0, s, 8):
        chunk = samples[start : start + 8]
        ids = torch.tensor([prompt + x + [0] * (tokens - len(x)) for x in chunk])
        logits = loaded.model(input_ids=ids, use_cache=False, logits_to_keep=tokens + 1).logits
        logits = logits[:, :tokens].to(torch.float64)  # row t predicts sample token t
        for row, sample in enumerate(chunk, start=start):
            mine = logits[row - start, : len(sample)]
            processed = processed_logits(mine[None], history, chain_paths(sample))[0]
            scores = score_rows(mine, sample, *cuts, top, processed)
            n = len(sample)
            for name in ("logprob", "p", "above", "gap", "boundary", "rank"):
                values = [getattr(x, name) for x in scores]
                out[name][row, :n] = [np.nan if v is None else v for v in values]
            out["logsumexp"][row, :n] = torch.logsumexp(mine, dim=-1).numpy()
            out["token"][row, :n] = sample
            out["top_ids"][row, :n] = [[t for t, _ in x.top] for x in scores]
            out["top_lp"][row, :n] = [[lp for _, lp in x.top] for x in scores]
    return out


def build(pool: PoolSpec, args: argparse.Namespace, loaded: LoadedModel) -> Path:
    oracle = args.oracle is not None
    path = pool.path(args.out, args.size, args.tokens, args.top, args.first, oracle)
    if path.exists():
        return path
    prompts = [chat_ids(loaded, text) for text in PROMPTS.values()]
    started = time.perf_counter()
    print(f"{pool}: drawing", flush=True)
    chosen = range(args.first, args.first + args.size)
    drafter = CorpusDrafter(corpus(args.oracle)) if oracle else make_drafter("ngram", loaded)
    samples = generate(loaded, pool, prompts, chosen, args.tokens, args.batch, drafter)
    drawn = time.perf_counter() - started
    parts = [
        score(loaded, prompt, found, pool, args.tokens, args.top)
        for prompt, found in zip(prompts, samples, strict=True)
    ]
    arrays = {k: np.stack([part[k] for part in parts]) for k in parts[0]}
    took = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    arrays["prompts"] = np.array(list(PROMPTS))
    arrays["prompt_ids"] = np.array(
        [np.pad(x, (0, max(map(len, prompts)) - len(x)), constant_values=-1) for x in prompts]
    )
    # Written whole or not at all: a part killed mid-write must not leave a pool a later
    # table would read as drawn.
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as file:
        np.savez_compressed(file, **arrays)  # type: ignore[arg-type]
    os.replace(partial, path)
    n = sum(len(x) for found in samples for x in found)
    print(f"{pool}: {n} tokens drawn in {drawn:.0f} s, scored by {took - drawn:.0f} s -> {path}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pools", nargs="+", type=PoolSpec.parse)
    parser.add_argument("--size", type=int, default=192)
    parser.add_argument("--first", type=int, default=0, help="the first sample's index")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(".cache/scored-power"))
    parser.add_argument(
        "--oracle", type=Path, action="append", help="an AR pool file (repeat for parts)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # 2 shared cores: more threads only oversubscribe
    loaded = load_model(MODEL)
    for pool in args.pools:
        build(pool, args, loaded)


if __name__ == "__main__":
    main()
