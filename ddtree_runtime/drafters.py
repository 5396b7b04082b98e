"""Drafters: per-position top-K draft distributions for the next L positions.

Interface: ``propose(contexts, depth, k, hidden=None) -> (logprobs [B, L, K], tokens [B, L, K])``,
sorted descending per position, -inf where there is no candidate. ``contexts`` are the token ids
up to and including the pending root. ``hidden`` (target hidden states of accepted tokens) is for
drafters that condition on them, as DFlash does.

``ngram`` looks up suffix matches in the context; ``oracle`` (tests only) knows the target's greedy
continuations and adds controllable noise; ``dflash:PATH`` loads a DFlash block-diffusion draft
checkpoint (``ddtree_runtime.dflash``) and drafts from the target's hidden states, which the engine
then keeps per request. DFlash is implemented against the public z-lab/dflash checkpoint format and
tested only with a tiny self-made random checkpoint on CPU: it has never been run on a real DFlash
checkpoint or on a GPU.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any, Protocol

import torch

from ddtree_runtime.models import LoadedModel

NEG_INF = float("-inf")


class Drafter(Protocol):
    name: str

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


def _empty(batch: int, depth: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.full((batch, depth, k), NEG_INF, dtype=torch.float32),
        torch.zeros((batch, depth, k), dtype=torch.long),
    )


class NgramDrafter:
    """Suffix-match lookup: the longest n-gram suffix that occurred before predicts what follows.

    For the longest n (max_n down to min_n) with earlier matches, the tokens following each match
    at offset i are counted; their frequencies give position i's distribution. No match: all -inf,
    so the tree is the root only (a plain AR step).
    """

    name = "ngram"

    def __init__(self, max_n: int = 4, min_n: int = 1, max_matches: int = 64) -> None:
        self.max_n, self.min_n, self.max_matches = max_n, min_n, max_matches

    def _matches(self, ctx: list[int]) -> tuple[int, list[int]]:
        for n in range(min(self.max_n, len(ctx) - 1), self.min_n - 1, -1):
            suffix = ctx[-n:]
            found = [
                s
                for s in range(len(ctx) - n - 1, -1, -1)  # most recent first
                if ctx[s : s + n] == suffix
            ][: self.max_matches]
            if found:
                return n, found
        return 0, []

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lps, toks = _empty(len(contexts), depth, k)
        for b, ctx in enumerate(contexts):
            n, starts = self._matches(ctx)
            for i in range(depth):
                follow = Counter(ctx[s + n + i] for s in starts if s + n + i < len(ctx))
                total = sum(follow.values())
                # most_common is stable on ties (first seen = most recent match first)
                for r, (tok, count) in enumerate(follow.most_common(k)):
                    lps[b, i, r] = math.log(count / total)
                    toks[b, i, r] = tok
        return lps, toks


class OracleDrafter:
    """Test-only: proposes the target's known greedy continuation, with seeded noise.

    ``references`` are full sequences (prompt + greedy continuation from the AR reference). The true
    token at each position is demoted to a lower rank with probability ``demote``, dropped with
    probability ``drop``; other ranks are random distractors. Deterministic per (context, position).
    """

    name = "oracle"

    def __init__(
        self,
        references: list[list[int]],
        vocab_size: int,
        demote: float = 0.25,
        drop: float = 0.15,
        seed: int = 0,
    ) -> None:
        self.references = references
        self.vocab_size = vocab_size
        self.demote, self.drop, self.seed = demote, drop, seed

    def _reference(self, ctx: list[int]) -> list[int] | None:
        for ref in self.references:
            if len(ref) >= len(ctx) and ref[: len(ctx)] == ctx:
                return ref
        return None

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lps, toks = _empty(len(contexts), depth, k)
        for b, ctx in enumerate(contexts):
            ref = self._reference(ctx)
            for i in range(depth):
                rng = random.Random(hash((self.seed, tuple(ctx[-8:]), len(ctx), i)))
                true = ref[len(ctx) + i] if ref is not None and len(ctx) + i < len(ref) else None
                cands = [t for t in rng.sample(range(self.vocab_size), k + 1) if t != true][:k]
                if true is not None and rng.random() >= self.drop:
                    rank = rng.randrange(1, k) if k > 1 and rng.random() < self.demote else 0
                    cands[rank] = true
                scores = sorted((rng.uniform(-4.0, -0.05) for _ in range(k)), reverse=True)
                lps[b, i] = torch.tensor(scores)
                toks[b, i] = torch.tensor(cands)
        return lps, toks


class DFlashDrafter:
    """A DFlash draft checkpoint from a local directory (see ``ddtree_runtime.dflash``).

    ``feature_layers`` tells the engine which target layers' outputs to keep per request;
    ``propose`` then runs one draft forward per request over [root, mask x (block - 1)]
    conditioned on those features of the whole committed context, takes logits through the
    target's lm_head and returns the top-k of each position's log-softmax. Depths past
    block_size - 1 stay empty (-inf). Implemented from the public reference's format and tested
    with a tiny self-made checkpoint on CPU only.
    """

    name = "dflash"

    def __init__(self, path: str, loaded: LoadedModel) -> None:
        from ddtree_runtime.dflash import load_dflash

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
        lps, toks = _empty(len(contexts), depth, k)
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


def make_drafter(spec: str, loaded: LoadedModel, **oracle_args: Any) -> Drafter:
    """'ngram' | 'dflash:PATH' | 'oracle' (tests only: pass references=...)."""
    if spec == "ngram":
        return NgramDrafter()
    if spec.startswith("dflash:"):
        path = spec.partition(":")[2]
        if not path:
            raise ValueError("dflash drafter needs a checkpoint path: dflash:/path/to/checkpoint")
        return DFlashDrafter(path, loaded)
    if spec == "oracle":
        if "references" not in oracle_args:
            raise ValueError("oracle drafter is test-only and needs references=[...]")
        vocab = int(loaded.model.config.vocab_size)
        return OracleDrafter(vocab_size=vocab, **oracle_args)
    raise ValueError(f"unknown drafter {spec!r}: use ngram, dflash:PATH or oracle")
