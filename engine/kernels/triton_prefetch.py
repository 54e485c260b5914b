"""Triton L2 prefetch: read a tensor so that its bytes sit in the GPU's L2 for the next kernel.

A decode step alternates weight-streaming projections with small kernels (RoPE and the KV
write, attention, norms) during which memory sits idle. Reading the next projection's weight
on a side stream during those kernels moves its bytes from memory while nothing else does;
the projection then finds them in L2 (50 MB on an H100/H200). The bytes read are the same,
only earlier.

One program reads BLOCK 4-byte words, ORs them together and stores the one word: the store
keeps the compiler from dropping the loads, and costs 4 bytes per 8 KB read.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels import checks

BLOCK = 2048          # int32 words (8 KB) per program


@triton.jit
def _prefetch_kernel(src_ptr, sink_ptr, n_words, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    words = tl.load(src_ptr + offs, mask=offs < n_words, other=0)
    tl.store(sink_ptr + pid, tl.reduce_or(words, axis=0))


def prefetch_l2_triton(t: torch.Tensor, nbytes: int | None = None) -> torch.Tensor:
    """Read t's first nbytes (all of it by default) on the current stream; returns the sink
    (one int32 per program), which callers may drop."""
    checks.expect("prefetch_l2", "t", t)
    if not t.is_contiguous():
        raise checks.KernelInputError("prefetch_l2", "t", "must be contiguous")
    total = t.numel() * t.element_size()
    n = total if nbytes is None else min(int(nbytes), total)
    if n < 0:
        raise checks.KernelInputError("prefetch_l2", "nbytes", f"expected >= 0, got {nbytes}")
    words = n // 4
    grid = triton.cdiv(words, BLOCK)
    sink = torch.empty(max(grid, 1), dtype=torch.int32, device=t.device)
    if grid == 0:
        return sink
    flat = t.view(-1).view(torch.uint8)[: words * 4].view(torch.int32)
    _prefetch_kernel[(grid,)](flat, sink, words, BLOCK=BLOCK, num_warps=8)
    return sink


__all__ = ["BLOCK", "prefetch_l2_triton"]
