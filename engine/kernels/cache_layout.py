"""How the paged KV cache is laid out in memory, by cache dtype.

Every cache is indexed the same way, [..., num_blocks, block_size, num_kv_heads, head_dim]; only
the strides of an int8 V cache differ. Its storage is [..., num_blocks, num_kv_heads, head_dim,
block_size] ("page-transposed"): a block's tokens are contiguous for each (kv head, dimension).
The decode kernel's output is a sum over tokens, so this puts the reduction axis of its P @ V
product contiguous, the layout the tensor cores take V in; stored token-major, int8 V reached
them one byte at a time (docs/perf/kernels.md). K keeps the token-major layout (its dot reduces
over head_dim, already contiguous), and so do float caches. Code that indexes the cache with
torch reads and writes through the strided view unchanged; the Triton kernels check the layout
(checks.check_cache) and address it directly.
"""
from __future__ import annotations

import torch


def page_transposed(dtype: torch.dtype) -> bool:
    """Whether a V cache of this dtype is stored page-transposed."""
    return dtype == torch.int8


def empty_cache(shape: tuple[int, ...], dtype: torch.dtype, device, *, v: bool) -> torch.Tensor:
    """A zeroed cache [..., num_blocks, block_size, num_kv_heads, head_dim] in its dtype's layout."""
    if not (v and page_transposed(dtype)):
        return torch.zeros(shape, dtype=dtype, device=device)
    *lead, nb, bs, hkv, d = shape
    n = len(lead)
    store = torch.zeros((*lead, nb, hkv, d, bs), dtype=dtype, device=device)
    return store.permute(*range(n), n, n + 3, n + 1, n + 2)


def v_strides(block_size: int, num_kv_heads: int, head_dim: int) -> tuple[int, int, int, int]:
    """Strides (block, token, kv head, dim) of one layer's page-transposed V cache."""
    return (num_kv_heads * head_dim * block_size, 1, head_dim * block_size, block_size)


def has_layout(cache: torch.Tensor, *, v: bool) -> bool:
    """Whether one layer's cache [num_blocks, block_size, num_kv_heads, head_dim] is laid out as
    empty_cache lays it out (a layer's slice of the pool's tensor included)."""
    if not (v and page_transposed(cache.dtype)):
        return cache.is_contiguous()
    _, bs, hkv, d = cache.shape
    return cache.stride() == v_strides(bs, hkv, d)


__all__ = ["page_transposed", "empty_cache", "v_strides", "has_layout"]
