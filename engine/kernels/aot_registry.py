"""Which kernels and specializations the build compiles ahead of time (engine.kernels.aot_build).

Nothing here restates a kernel's signature: each entry calls the real launch wrapper
(triton_decode / triton_kv_write) on CPU tensors laid out as the engine lays them out on the
GPU, and the launch is caught before it runs (`captured_launches`). The wrapper's own choices
(block sizes, num_warps, DecodeConfig) are therefore what gets compiled: a retuned kernel
changes the artifact and nothing in the pipeline. Triton's key also covers each int argument's
divisibility by 16 (and whether it is 1) and each pointer's alignment; the decode kernels take
the strides that follow a block table's width unspecialized (triton_decode), so one width gives
every key a width can. A specialization not listed is simply compiled just in time.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import torch

from engine.kernels.cache_layout import empty_cache

ARCHS = (80, 86, 89, 90)           # compute capabilities: sm_80, sm_86, sm_89, sm_90
PAGE = 16                          # engine.runtime.llm.LLM's default block_size
# (compute dtype, KV cache dtype): dtype "auto" is the checkpoint's own (float32 for the tiny and
# reference models), kv_dtype "auto" the compute dtype; int8 is the quantised cache.
DTYPES = ((torch.float32, torch.float32), (torch.float32, torch.int8),
          (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.int8))
# Block-table widths: the CUDA graphs' width is max_context / PAGE (128 at 2048 positions, 512 at
# 8192); eager decode uses the batch's widest table, any width. The strides a width moves (the
# table's row stride, the split LSE buffer's strides) are declared do_not_specialize in
# triton_decode, so every width binds to the same key and one width lists them all;
# tests/engine/test_aot_registry_coverage.py checks every width of 1..512 against the registry.
# (Specialized, they took 15 widths and 168 sm_90 keys; docs/REPRODUCIBILITY.md.)
TABLE_WIDTHS = (1,)


@dataclass(frozen=True)
class Shape:
    name: str
    num_heads: int
    num_kv_heads: int
    head_dim: int


# The tiny test models (engine.model.tiny.SHAPES) and the reference model (SmolLM2-135M).
SHAPES = (Shape("tiny-llama", 4, 2, 16), Shape("tiny-qwen3", 4, 2, 32), Shape("smollm2-135m", 9, 3, 64))


@dataclass(frozen=True)
class Launch:
    kernel: object      # the triton JITFunction
    args: tuple
    kwargs: dict


@contextlib.contextmanager
def captured_launches() -> Iterator[list[Launch]]:
    """Inside: a launch `kernel[grid](...)` of the engine's kernels records its arguments and runs nothing."""
    from engine.kernels import triton_decode, triton_kv_write
    kernels = (triton_decode._decode_split_kernel, triton_decode._decode_merge_kernel,
               triton_kv_write._write_kv_kernel, triton_kv_write._rope_write_kv_kernel)
    caught: list[Launch] = []
    for k in kernels:   # an instance attribute shadows JITFunction.run, which __getitem__ calls
        k.run = (lambda kern: lambda *a, grid, warmup, **kw: caught.append(Launch(kern, a, dict(kw))))(k)
    try:
        yield caught
    finally:
        for k in kernels:
            del k.run


def launches() -> list[Launch]:
    """Every launch the registry asks for, in a fixed order."""
    from engine.kernels.triton_decode import paged_decode_attention_triton
    from engine.kernels.triton_kv_write import rope_write_kv_triton, write_kv_triton
    with captured_launches() as caught:
        for (dtype, kv_dtype), s in ((dt, s) for dt in DTYPES for s in SHAPES):
            h, kvh, d = s.num_heads, s.num_kv_heads, s.head_dim
            n = 2
            qkv = torch.zeros((n, h + 2 * kvh, d), dtype=dtype)
            qk = torch.zeros((n, h + kvh, d), dtype=dtype)        # rope over q and k heads at once
            k_own = torch.zeros((n, kvh, d), dtype=dtype)         # a q/k-normed model's rotated k
            cos = torch.zeros((n, d), dtype=dtype)
            slots = torch.zeros((n,), dtype=torch.int64)
            kc, vc, ks, vs = _cache(kvh, d, kv_dtype)
            rope_write_kv_triton(qkv, h, kvh, cos, cos, kc, vc, ks, vs, slots)
            v = qkv[:, h + kvh:]
            for k in (qk[:, h:], k_own):                           # transformer.Attention's two paths
                write_kv_triton(k, v, kc, vc, ks, vs, slots)
            for q in (torch.zeros((n, h, d), dtype=dtype), qk[:, :h]):
                for width in TABLE_WIDTHS:
                    tables = torch.zeros((n, width), dtype=torch.int32)
                    lens = torch.ones((n,), dtype=torch.int32)
                    paged_decode_attention_triton(q, kc, vc, ks, vs, tables, lens, d ** -0.5)
    return caught


def _cache(kvh: int, d: int, kv_dtype: torch.dtype):
    """One layer's slice of engine.runtime.kv_pool.KVPool's tensors (4 blocks + the scratch block)."""
    shape = (2, 5, PAGE, kvh, d)
    k = empty_cache(shape, kv_dtype, "cpu", v=False)[1]
    v = empty_cache(shape, kv_dtype, "cpu", v=True)[1]      # int8: page-transposed, as the pool's
    if kv_dtype != torch.int8:
        return k, v, None, None
    return k, v, torch.zeros(shape[:-1], dtype=torch.float32)[1], torch.zeros(shape[:-1], dtype=torch.float32)[1]
