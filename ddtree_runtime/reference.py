"""The independent autoregressive reference: a plain Hugging Face greedy loop, one token at a time.

It shares no code with the engine (DynamicCache, causal masking done by transformers), so agreement
between the two is evidence, not a tautology.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache


@torch.inference_mode()
def greedy_reference(
    model: Any, prompt: list[int], max_new_tokens: int, eos_token_ids: list[int]
) -> list[int]:
    """Greedy continuation of `prompt` (EOS included when produced, then stop)."""
    device = next(model.parameters()).device
    cache = DynamicCache(config=model.config)
    ids = torch.tensor([prompt], device=device)
    out: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(input_ids=ids, cache=cache, use_cache=True).logits[0, -1]
        token = int(logits.argmax())
        out.append(token)
        if token in eos_token_ids:
            break
        ids = torch.tensor([[token]], device=device)
    return out


def divergence_index(got: list[int], want: list[int]) -> int | None:
    """First index where two token sequences differ (a length difference counts), else None."""
    if got == want:
        return None
    return next(
        (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )


@torch.inference_mode()
def reference_cache(model: Any, tokens: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer (keys, values) [kv_heads, len, head_dim] that AR decoding builds for `tokens`."""
    device = next(model.parameters()).device
    cache = DynamicCache(config=model.config)
    for t in tokens:  # one token at a time, exactly as AR decoding fills it
        model(input_ids=torch.tensor([[t]], device=device), cache=cache, use_cache=True)
    return [(layer.keys[0], layer.values[0]) for layer in cache.layers]  # type: ignore[union-attr,index]
