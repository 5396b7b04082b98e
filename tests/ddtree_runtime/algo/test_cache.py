"""The slot cache's zeroed buffers: zeros, writable, fresh for every engine, and on the CPU not
written until used (a switch builds a new cache of hundreds of megabytes)."""

from __future__ import annotations

import os

import pytest
import torch

from ddtree_runtime.algo.cache import zeroed

CPU = torch.device("cpu")


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_zeroed_is_zeros_of_its_shape_and_takes_writes(dtype: torch.dtype) -> None:
    a = zeroed((2, 3, 5, 4), dtype, CPU)
    assert a.shape == (2, 3, 5, 4) and a.dtype == dtype and a.is_contiguous()
    assert not bool(a.any())
    a[1, :, 2] = 7
    b = zeroed((2, 3, 5, 4), dtype, CPU)  # another buffer: nothing of the first
    assert not bool(b.any()) and float(a[1, 0, 2, 0]) == 7.0 and int(a.count_nonzero()) == 12
    del a
    assert not bool(zeroed((2, 3, 5, 4), dtype, CPU).any())  # after a release too
    assert zeroed((0, 3), dtype, CPU).shape == (0, 3)


def test_a_cpu_buffer_takes_memory_only_where_it_is_written() -> None:
    size = 256 << 20  # 256 MiB of float32
    before = _resident_bytes()
    buffer = zeroed((64, size // 64 // 4), torch.float32, CPU)
    assert _resident_bytes() - before < size // 16  # allocated, not written
    buffer[0].fill_(1.0)  # one row of 64: 4 MiB
    grown = _resident_bytes() - before
    assert size // 128 <= grown < size // 8, grown
    assert float(buffer.sum()) == buffer.shape[1]
