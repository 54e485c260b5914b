"""Random paged KV caches for the kernel tests: real tokens at scattered blocks, garbage elsewhere."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.kernels.cache_layout import empty_cache
from engine.kernels.reference import write_kv_ref


@dataclass
class Paged:
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    k_scale: torch.Tensor | None
    v_scale: torch.Tensor | None
    block_tables: torch.Tensor      # [batch, width] int32, -1 padded
    seq_lens: torch.Tensor          # [batch] int32
    k: list[torch.Tensor]           # per sequence [len, Hkv, D] float32, as written
    v: list[torch.Tensor]

    def cache_args(self):
        return self.k_cache, self.v_cache, self.k_scale, self.v_scale


def randn(gen, *shape, dtype=torch.float32, device="cpu", scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=dtype)


def build(gen, seq_lens, *, num_kv_heads, head_dim, block_size=16, cache_dtype=torch.float32,
          compute_dtype=torch.float32, device="cpu", width=None, spare_blocks=3, kv=None) -> Paged:
    """Write random KV (or ``kv`` = (k list, v list)) for each sequence into shuffled blocks."""
    nblk = [-(-n // block_size) for n in seq_lens]
    width = width or max(1, max(nblk))
    num_blocks = sum(nblk) + spare_blocks
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    is_int8 = cache_dtype == torch.int8
    # Garbage, not zeros, in every slot that no sequence owns: a wrong read changes the result.
    if is_int8:
        k_cache = torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8).to(device)
        v_cache = empty_cache(shape, torch.int8, device, v=True)          # page-transposed, as the pool's
        v_cache.copy_(torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8))
        k_scale = (torch.rand(shape[:3], generator=gen) * 5).to(device)
        v_scale = (torch.rand(shape[:3], generator=gen) * 5).to(device)
    else:
        k_cache = randn(gen, *shape, dtype=cache_dtype, device=device, scale=30.0)
        v_cache = randn(gen, *shape, dtype=cache_dtype, device=device, scale=30.0)
        k_scale = v_scale = None
    perm = torch.randperm(num_blocks, generator=gen)
    tables = torch.full((len(seq_lens), width), -1, dtype=torch.int32)
    ks, vs, used = [], [], 0
    for b, n in enumerate(seq_lens):
        tables[b, : nblk[b]] = perm[used: used + nblk[b]].int()
        used += nblk[b]
        if kv is None:
            k = randn(gen, n, num_kv_heads, head_dim)
            v = randn(gen, n, num_kv_heads, head_dim)
        else:
            k, v = kv[0][b], kv[1][b]
        pos = torch.arange(n)
        slots = tables[b, pos // block_size].long() * block_size + pos % block_size
        wdtype = compute_dtype if is_int8 else cache_dtype
        write_kv_ref(k.to(device, wdtype), v.to(device, wdtype), k_cache, v_cache,
                     k_scale, v_scale, slots.to(device))
        ks.append(k)
        vs.append(v)
    return Paged(k_cache, v_cache, k_scale, v_scale, tables.to(device),
                 torch.tensor(seq_lens, dtype=torch.int32, device=device), ks, vs)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    assert torch.isfinite(out).all(), "output holds NaN or Inf"
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))
