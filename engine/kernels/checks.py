"""Shape, dtype and device checks shared by the references and the Triton kernels.

Only metadata is inspected, never values, so a check costs no device synchronisation.
"""

from __future__ import annotations

import operator

import torch

from engine.kernels import cache_layout
from engine.kernels.errors import KernelInputError

COMPUTE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def expect(op: str, name: str, t: object, *, ndim: int | None = None,
           dtypes: tuple[torch.dtype, ...] | None = None,
           device: torch.device | None = None,
           shape: tuple[int | None, ...] | None = None) -> torch.Tensor:
    """Raise KernelInputError unless ``t`` is a tensor matching every given constraint."""
    if not isinstance(t, torch.Tensor):
        raise KernelInputError(op, name, f"expected a torch.Tensor, got {type(t).__name__}")
    if ndim is not None and t.dim() != ndim:
        raise KernelInputError(op, name, f"expected {ndim} dimensions, got shape {_shape(t)}")
    if dtypes is not None and t.dtype not in dtypes:
        raise KernelInputError(op, name, f"expected dtype in {[str(d) for d in dtypes]}, got {t.dtype}")
    if device is not None and t.device != device:
        raise KernelInputError(op, name, f"expected device {device}, got {t.device}")
    if shape is not None:
        if len(shape) != t.dim() or any(s is not None and s != a for s, a in zip(shape, t.shape)):
            want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
            raise KernelInputError(op, name, f"expected shape {want}, got {_shape(t)}")
    return t


def check_cache(op: str, k_cache, v_cache, k_scale, v_scale, device: torch.device):
    """Validate the paged KV cache; returns (num_blocks, block_size, num_kv_heads, head_dim, is_int8)."""
    expect(op, "k_cache", k_cache, ndim=4, dtypes=COMPUTE_DTYPES + (torch.int8,), device=device)
    expect(op, "v_cache", v_cache, shape=tuple(k_cache.shape), dtypes=(k_cache.dtype,), device=device)
    if not cache_layout.has_layout(k_cache, v=False):
        raise KernelInputError(op, "k_cache", "the paged cache must be contiguous")
    if not cache_layout.has_layout(v_cache, v=True):
        want = ("page-transposed (engine.kernels.cache_layout.empty_cache)"
                if cache_layout.page_transposed(v_cache.dtype) else "contiguous")
        raise KernelInputError(op, "v_cache", f"a {v_cache.dtype} V cache must be {want}, "
                                              f"got strides {tuple(v_cache.stride())}")
    nb, bs, hkv, d = k_cache.shape
    is_int8 = k_cache.dtype == torch.int8
    if is_int8:
        for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
            if s is None:
                raise KernelInputError(op, name, "an int8 cache needs its float32 scales, got None")
            expect(op, name, s, shape=(nb, bs, hkv), dtypes=(torch.float32,), device=device)
            if not s.is_contiguous():
                raise KernelInputError(op, name, "the scale tensor must be contiguous")
    else:
        for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
            if s is not None:
                raise KernelInputError(op, name, f"a {k_cache.dtype} cache takes no scales; pass None")
    return nb, bs, hkv, d, is_int8


def check_gqa(op: str, num_q_heads: int, num_kv_heads: int) -> int:
    """Return the number of q heads per kv head."""
    if num_kv_heads <= 0 or num_q_heads % num_kv_heads != 0:
        raise KernelInputError(op, "q", f"num_q_heads {num_q_heads} is not a multiple of "
                                        f"num_kv_heads {num_kv_heads}")
    return num_q_heads // num_kv_heads


def check_write_kv(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping) -> bool:
    """Validate write_kv's arguments; returns whether the cache is int8."""
    op = "write_kv"
    expect(op, "k", k, ndim=3, dtypes=COMPUTE_DTYPES)
    dev = k.device
    _, _, hkv, d, is_int8 = check_cache(op, k_cache, v_cache, k_scale, v_scale, dev)
    expect(op, "k", k, shape=(None, hkv, d))
    expect(op, "v", v, shape=tuple(k.shape), dtypes=COMPUTE_DTYPES, device=dev)
    expect(op, "slot_mapping", slot_mapping, shape=(k.shape[0],), dtypes=(torch.int64,), device=dev)
    return is_int8


def check_decode(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens) -> bool:
    """Validate paged_decode_attention's arguments; returns whether the cache is int8."""
    op = "paged_decode_attention"
    expect(op, "q", q, ndim=3, dtypes=COMPUTE_DTYPES)
    dev = q.device
    _, _, hkv, d, is_int8 = check_cache(op, k_cache, v_cache, k_scale, v_scale, dev)
    expect(op, "q", q, shape=(None, None, d))
    check_gqa(op, q.shape[1], hkv)
    expect(op, "block_tables", block_tables, ndim=2, dtypes=(torch.int32,), device=dev)
    expect(op, "block_tables", block_tables, shape=(q.shape[0], None))
    expect(op, "seq_lens", seq_lens, shape=(q.shape[0],), dtypes=(torch.int32,), device=dev)
    return is_int8


def check_prefill(q, k_cache, v_cache, k_scale, v_scale, block_table, start_pos) -> tuple[bool, int]:
    """Validate paged_prefill_attention's arguments; returns (cache is int8, start_pos as int)."""
    op = "paged_prefill_attention"
    expect(op, "q", q, ndim=3, dtypes=COMPUTE_DTYPES)
    dev = q.device
    _, bs, hkv, d, is_int8 = check_cache(op, k_cache, v_cache, k_scale, v_scale, dev)
    expect(op, "q", q, shape=(None, None, d))
    check_gqa(op, q.shape[1], hkv)
    expect(op, "block_table", block_table, ndim=1, dtypes=(torch.int32, torch.int64), device=dev)
    try:
        pos = None if isinstance(start_pos, bool) else operator.index(start_pos)
    except TypeError:       # operator.index takes int, numpy integers, 0-d integer tensors
        pos = None
    start_pos = pos
    if start_pos is None or start_pos < 0:
        raise KernelInputError(op, "start_pos", "expected an integer >= 0")
    total = start_pos + q.shape[0]
    if total > block_table.shape[0] * bs:
        raise KernelInputError(op, "block_table", f"{block_table.shape[0]} blocks of {bs} tokens "
                                                  f"cannot hold {total} positions")
    return is_int8, start_pos
