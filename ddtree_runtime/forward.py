"""Target forwards over the slot cache: prefill one request, verify all trees (or a CUDA graph).

The verify forward reads static buffers (input ids, mask, position ids, write positions) that are
rewritten in place every step. On CPU the key length is bucketed to a multiple of 64 to save
compute. On CUDA with ``cuda_graph`` the forward is captured once at (max_batch, q_len, max_len)
and replayed; inactive slots then carry inert root-only rows. The CUDA path could not be run on the
CPU-only development machine. (With ``cuda_graph`` the engine passes q_len-wide trees whether or not
a graph was captured; without it, narrower ones.)

When a drafter conditions on the target's hidden states (DFlash), ``feature_layers`` names the
target layers whose outputs it needs: prefill returns them and verify leaves them in
``last_features``; the forward then runs eagerly (no CUDA graph). Otherwise nothing is collected.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ddtree_runtime.algo.cache import SlotCache
from ddtree_runtime.algo.mask import causal_mask

KV_BUCKET = 64


class VerifyForward:
    def __init__(self, model: Any, cache: SlotCache, config: Any, q_len: int, max_len: int) -> None:
        self.model, self.cache, self.q_len, self.max_len = model, cache, q_len, max_len
        self.max_batch = config.max_batch
        dev = next(model.parameters()).device
        self.device = dev
        self.dtype = next(model.parameters()).dtype
        self.mask = torch.zeros((self.max_batch, 1, q_len, max_len), dtype=self.dtype, device=dev)
        self.positions = torch.zeros((self.max_batch, q_len), dtype=torch.long, device=dev)
        self.input_ids = torch.zeros((self.max_batch, q_len), dtype=torch.long, device=dev)
        self.write_pos = torch.zeros((self.max_batch, q_len), dtype=torch.long, device=dev)
        self.graph_enabled = bool(config.cuda_graph) and dev.type == "cuda"
        if dev.type != "cuda":
            self.graph_reason = f"not applicable on {dev.type}"
        else:
            self.graph_reason = "captured at first verify" if config.cuda_graph else "disabled"
        self._graph: Any = None
        self.graph_captured_at: float | None = None  # unix seconds (start-up and switch phases)
        self._graph_logits: torch.Tensor | None = None
        self.feature_layers: list[int] | None = None
        self.last_features: torch.Tensor | None = None

    def want_features(self, layers: list[int]) -> None:
        """Collect the outputs of these target layers (0-based) in every forward from now on."""
        self.feature_layers = list(layers)
        if self.graph_enabled:
            self.graph_enabled = False
            self.graph_reason = "disabled: the drafter needs the target's hidden states"

    def _features(self, out: Any) -> torch.Tensor | None:
        """Selected layers' outputs concatenated on the last axis: [rows, q, len(layers) * H]."""
        if self.feature_layers is None:
            return None
        states = out.hidden_states  # [embeddings, layer 0 output, ...]
        return torch.cat([states[i + 1] for i in self.feature_layers], dim=-1)

    def kv_len(self, needed: int) -> int:
        if self.graph_enabled:
            return self.max_len
        return min(self.max_len, -(-needed // KV_BUCKET) * KV_BUCKET)

    def buffers(self, n: int, kv_len: int, q_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of the static mask [n,1,q,kv] and positions [n,q] to fill in place."""
        return self.mask[:n, :, :q_len, :kv_len], self.positions[:n, :q_len]

    @torch.inference_mode()
    def prefill(self, slot: int, ids: list[int]) -> torch.Tensor | None:
        """Write the KV of `ids` (the prompt without its last token) into `slot` from position 0.

        Returns the selected layers' features [len(ids), F] when ``feature_layers`` is set.
        """
        if not ids:
            return self._no_features()
        length = len(ids)
        kv = self.kv_len(length)
        self.cache.target(
            slice(slot, slot + 1), torch.arange(length, device=self.device)[None, :], kv
        )
        out = self.model(
            input_ids=torch.tensor([ids], device=self.device),
            attention_mask=causal_mask(length, kv, 0, self.dtype, str(self.device)),
            position_ids=torch.arange(length, device=self.device)[None, :],
            cache=self.cache,
            logits_to_keep=1,
            output_hidden_states=self.feature_layers is not None,
        )
        feats = self._features(out)
        return None if feats is None else feats[0]

    def _no_features(self) -> torch.Tensor | None:
        if self.feature_layers is None:
            return None
        width = len(self.feature_layers) * int(self.model.config.hidden_size)
        return torch.zeros((0, width), dtype=self.dtype, device=self.device)

    @torch.inference_mode()
    def verify(
        self, n: int, tokens: torch.Tensor, prefix: torch.Tensor, kv_len: int
    ) -> torch.Tensor:
        """Logits [n, q, V] of all tree nodes (mask and positions already filled for n rows).

        q is the trees' width: the fixed q_len under a CUDA graph, possibly less elsewhere.
        """
        q = tokens.shape[1]
        self.input_ids[:n, :q].copy_(tokens)
        self.write_pos[:n, :q].copy_(prefix[:, None] + torch.arange(q, device=self.device)[None, :])
        if self.graph_enabled:
            assert q == self.q_len, "a captured graph replays at its fixed query length"
            return self._replay(n)[:n]
        self.cache.target(slice(0, n), self.write_pos[:n, :q], kv_len)
        out = self.model(
            input_ids=self.input_ids[:n, :q],
            attention_mask=self.mask[:n, :, :q, :kv_len],
            position_ids=self.positions[:n, :q],
            cache=self.cache,
            output_hidden_states=self.feature_layers is not None,
        )
        self.last_features = self._features(out)
        return self._upcast(out.logits)

    @staticmethod
    def _upcast(logits: torch.Tensor) -> torch.Tensor:
        # Choices and logprobs in at least fp32; float64 models keep float64 (exactness tests).
        return logits if logits.dtype == torch.float64 else logits.float()

    def _inert_rows(self, n: int) -> None:
        """Inactive slots: root-only rows at position 0 that see only themselves."""
        if n >= self.max_batch:
            return
        q = self.q_len
        self.input_ids[n:].zero_()
        self.positions[n:].zero_()
        self.write_pos[n:].copy_(torch.arange(q, device=self.device)[None, :])
        self.mask[n:].fill_(float("-inf"))
        idx = torch.arange(q, device=self.device)
        self.mask[n:, 0, idx, idx] = 0.0

    def _replay(self, n: int) -> torch.Tensor:
        self._inert_rows(n)
        self.cache.target(slice(0, self.max_batch), self.write_pos, self.max_len)

        def run() -> torch.Tensor:
            return self.model(
                input_ids=self.input_ids,
                attention_mask=self.mask,
                position_ids=self.positions,
                cache=self.cache,
            ).logits

        if self._graph is None:
            # Warm up on a side stream (lazy init, autotuning), then capture once.
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                run()
            torch.cuda.current_stream().wait_stream(stream)
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph):
                self._graph_logits = run()
            self.graph_captured_at = time.time()
        self._graph.replay()
        assert self._graph_logits is not None
        return self._upcast(self._graph_logits)
