"""The DFlash drafter: a DFlash draft checkpoint that drafts from the target's hidden states.

The draft model itself (its checkpoint format and forward) is ``dflash_model``; this adapter checks
it against the target, borrows the target's embeddings and lm_head, and turns one draft forward per
request into top-k proposals. Implemented from the public reference's format and tested with a tiny
self-made checkpoint on CPU only: never run on a real DFlash checkpoint or on a GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from ddtree_runtime.drafters.base import empty_proposal
from ddtree_runtime.drafters.dflash_model import load_dflash
from ddtree_runtime.models import LoadedModel


class DFlashDrafter:
    """A DFlash draft checkpoint from a local directory (see ``dflash_model``).

    ``feature_layers`` tells the engine which target layers' outputs to keep per request;
    ``propose`` then runs one draft forward per request over [root, mask x (block - 1)]
    conditioned on those features of the whole committed context, takes logits through the
    target's lm_head and returns the top-k of each position's log-softmax. Depths past
    block_size - 1 stay empty (-inf). Implemented from the public reference's format and tested
    with a tiny self-made checkpoint on CPU only.
    """

    name = "dflash"

    def __init__(self, path: str, loaded: LoadedModel) -> None:
        model = load_dflash(path)
        target = loaded.model
        tcfg = target.config
        hidden, n_layers = int(tcfg.hidden_size), int(tcfg.num_hidden_layers)
        vocab = int(tcfg.vocab_size)
        if model.cfg.hidden_size != hidden:
            raise ValueError(
                f"dflash: drafter hidden_size {model.cfg.hidden_size} != the target's {hidden}"
            )
        if not all(0 <= i < n_layers for i in model.target_layer_ids):
            raise ValueError(
                f"dflash: target_layer_ids {model.target_layer_ids} out of range for a target "
                f"with {n_layers} layers"
            )
        if model.vocab_size is not None and int(model.vocab_size) != vocab:
            raise ValueError(
                f"dflash: drafter vocab_size {model.vocab_size} != the target's {vocab}"
            )
        if not 0 <= model.mask_token_id < vocab:
            raise ValueError(f"dflash: mask_token_id {model.mask_token_id} not in [0, {vocab})")
        param = next(target.parameters())
        self.model = model.to(device=param.device, dtype=param.dtype)
        self.embed = target.get_input_embeddings()
        self.head = target.get_output_embeddings()
        self.feature_layers = list(model.target_layer_ids)
        self.block_size = model.block_size

    @torch.inference_mode()
    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lps, toks = empty_proposal(len(contexts), depth, k)
        if hidden is None:
            raise ValueError("dflash drafter needs the target's hidden states (hidden=...)")
        m = self.model
        steps = min(depth, self.block_size - 1)
        if steps <= 0:
            return lps, toks
        dev = self.embed.weight.device
        for b, ctx in enumerate(contexts):
            feats = hidden[b]
            if feats is None or feats.shape[0] != len(ctx) - 1:
                got = None if feats is None else feats.shape[0]
                raise ValueError(f"dflash: {got} feature rows for a context of {len(ctx)} tokens")
            block = torch.full((1, steps + 1), m.mask_token_id, dtype=torch.long, device=dev)
            block[0, 0] = ctx[-1]
            emb = self.embed(block) * m.embedding_scale
            out = m(feats[None].to(emb.dtype), emb)[:, 1:]
            logits = self.head(out)[0].float() * m.output_multiplier
            if m.softcap > 0:
                logits = torch.tanh(logits / m.softcap) * m.softcap
            top = torch.topk(torch.log_softmax(logits, dim=-1), min(k, logits.shape[-1]), dim=-1)
            width = top.values.shape[-1]
            lps[b, :steps, :width] = top.values.cpu()
            toks[b, :steps, :width] = top.indices.cpu()
        return lps, toks
