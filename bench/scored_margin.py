"""The bundled runtime's near-tie margin for scoring, measured: how far its `/score` prefill moves
a difference of raw logprobs from what its sampler saw, the noise a near tie is judged against
(`sweeper.catalog.scoring`, `near_tie_margin`).

Samples are drawn in process (smollm2-135m, the chat prompts of `bench/scored_pools.py`, AR and
DDTree b16 k4 with n-gram drafts, at temperature 0.7, top-k 20, batched), each emitted token with
the raw logprobs of the sampler's own logits (`logprobs`: the decode or verify row it was drawn
from) for its top `--top` ids; each sample is then scored by the route's code
(`ddtree_runtime.score.continuation_logits`, one plain prefill). Per position, d_i is the
sampler's raw logprob of id i less the scorer's; the largest change of any difference of two of
them (max d - min d over the top ids and the drawn token) is what the scorer can move a token's
distance to a boundary by. Printed: its largest and 99.9th percentile over all positions.

    python bench/scored_margin.py [--size 8] [--tokens 24] [--top 64]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from scored_pools import MODEL, PROMPTS, chat_ids  # bench/ is the script's own directory

from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine
from ddtree_runtime.models import load_model
from ddtree_runtime.params import EngineConfig, SamplingParams
from ddtree_runtime.score import continuation_logits


def spreads(args: argparse.Namespace, speculative: bool) -> list[float]:
    """Per emitted token: max d - min d over its sampler's top ids and itself (docstring)."""
    loaded = load_model(MODEL)
    prompts = [chat_ids(loaded, text) for text in PROMPTS.values()]
    config = EngineConfig(
        speculative="ddtree" if speculative else "none",
        budget=16 if speculative else 0,
        topk=4,
        block_size=8,
        max_batch=32,
        max_model_len=max(len(p) for p in prompts) + args.tokens + 32,
    )
    engine = Engine(loaded, make_drafter("ngram", loaded), config)
    requests = [(i, k) for k in range(args.size) for i in range(len(prompts))]
    params = [
        SamplingParams(
            max_tokens=args.tokens, temperature=0.7, top_k=20, seed=9_000_000 + 1_003 * i + k,
            logprobs=args.top,
        )
        for i, k in requests
    ]  # fmt: skip
    results = engine.generate([prompts[i] for i, _ in requests], params)
    out: list[float] = []
    for (i, _), result in zip(requests, results, strict=True):
        raw = torch.log_softmax(continuation_logits(loaded.model, prompts[i], result.token_ids), -1)
        for row, entry in zip(raw, result.logprobs or [], strict=True):
            pairs = [*entry.top, (entry.token_id, entry.logprob)]
            d = [lp - float(row[token]) for token, lp in pairs]
            out.append(max(d) - min(d))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8, help="samples per prompt")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--top", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, speculative in (("AR", False), ("DDTree b16", True)):
        found = np.array(spreads(args, speculative))
        print(
            f"{name}: {found.size} tokens, largest change of a logprob difference "
            f"{found.max():.3g} nats, 99.9th percentile {np.quantile(found, 0.999):.3g}",
            flush=True,
        )


if __name__ == "__main__":
    main()
