"""Slot KV cache: preallocated per-request buffers that every row writes at its own offset.

Each active request owns one slot (row) of [max_batch, kv_heads, max_len, head_dim] buffers per
layer; active requests always occupy slots [0, n) so a verify forward reads a view. A forward writes
its q new keys at the per-row positions in ``write_pos`` and attends over ``[rows, :, :kv_len]``
(a bucketed length on CPU to save compute, the full length under CUDA graphs). ``commit`` copies
the accepted path's keys contiguously after the prefix; rejected and padding keys stay beyond the
committed length, where no mask ever lets a real row see them.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


def zeroed(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero tensor. On the CPU, an anonymous mapping, which the kernel fills with zeros a page at
    a time as it is first touched: a slot cache is mostly never written (max_batch rows of max_len
    positions, for a few short requests), and `torch.zeros` writes all of it (761 MB for
    smollm2-135m at the server's defaults: 1.4 s of an in-place switch on 2 cores). A fresh
    mapping holds nothing of an earlier engine's."""
    count = math.prod(shape)
    if device.type != "cpu" or count == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    size = count * torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer(mmap.mmap(-1, size), dtype=dtype, count=count).view(shape)


class SlotLayer(CacheLayerMixin):
    """One layer's slot buffers; the owning SlotCache says where this forward writes."""

    is_compileable = True

    def __init__(self, owner: SlotCache) -> None:
        super().__init__()
        self.owner = owner

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        o = self.owner
        shape = (o.max_batch, key_states.shape[1], o.max_len, key_states.shape[-1])
        self.keys = zeroed(shape, key_states.dtype, key_states.device)
        vshape = (*shape[:3], value_states.shape[-1])
        self.values = zeroed(vshape, value_states.dtype, value_states.device)
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self.keys is not None and self.values is not None
        o = self.owner
        rows = o.rows
        n, q = o.write_pos.shape
        bi = torch.arange(rows.start, rows.start + n, device=key_states.device)[:, None].expand(
            n, q
        )
        self._put(self.keys, bi, o.write_pos, key_states)
        self._put(self.values, bi, o.write_pos, value_states)
        return self.keys[rows, :, : o.kv_len], self.values[rows, :, : o.kv_len]

    @staticmethod
    def _put(buf: torch.Tensor, bi: torch.Tensor, pos: torch.Tensor, new: torch.Tensor) -> None:
        # buf[bi, :, pos] has shape [n, q, heads, dim] (advanced indices first).
        buf[bi, :, pos] = new.transpose(1, 2).to(buf.dtype)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.owner.kv_len, 0

    def get_seq_length(self) -> int:
        return 0  # positions are always passed explicitly

    def get_max_length(self) -> int:
        return self.owner.max_len


class SlotCache(Cache):
    """Per-slot KV buffers for all layers; ``target`` says where the next forward writes."""

    def __init__(self, num_layers: int, max_batch: int, max_len: int) -> None:
        self.max_batch = max_batch
        self.max_len = max_len
        self.rows = slice(0, 0)
        self.write_pos = torch.zeros((0, 0), dtype=torch.long)
        self.kv_len = 0
        self.slot_layers = [SlotLayer(self) for _ in range(num_layers)]
        super().__init__(layers=list(self.slot_layers))

    def target(self, rows: slice, write_pos: torch.Tensor, kv_len: int) -> None:
        """Where the next forward writes (per-row absolute positions) and how much it reads."""
        self.rows, self.write_pos, self.kv_len = rows, write_pos, kv_len

    def commit(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """For slots 0..n-1 copy positions src[i, :] to dst[i, :] (gather first, then write)."""
        n, p = src.shape
        bi = torch.arange(n, device=src.device)[:, None].expand(n, p)
        for layer in self.slot_layers:
            for buf in (layer.keys, layer.values):
                if buf is None:
                    continue
                moved = buf[bi, :, src]  # a copy: advanced indexing gathers
                buf[bi, :, dst] = moved

    def move_slot(self, src: int, dst: int, length: int) -> None:
        """Copy slot src's first `length` positions into slot dst (compacting active slots)."""
        for layer in self.slot_layers:
            for buf in (layer.keys, layer.values):
                if buf is not None:
                    buf[dst, :, :length] = buf[src, :, :length]

    def slot_kv(self, slot: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The committed (keys, values) of one slot per layer, for tests against AR."""
        out = []
        for layer in self.slot_layers:
            assert layer.keys is not None and layer.values is not None
            out.append((layer.keys[slot, :, :length], layer.values[slot, :, :length]))
        return out
