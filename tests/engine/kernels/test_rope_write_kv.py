"""Fused RoPE + KV write (Triton) against the reference: rotated q, and the cache it writes."""

from __future__ import annotations

import pytest
import torch

from engine.kernels.reference import rope_write_kv_ref
from engine.kernels.triton_kv_write import rope_write_kv_triton
from tests.engine.kernels.paged_inputs import randn
from tests.engine.kernels.test_kv_write import BS, NB, is_poison, poisoned_cache


def _dequant(c, s):
    return c.float() if s is None else c.float() * s[..., None]


@pytest.mark.parametrize("dtype,cache_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                               (torch.bfloat16, torch.int8)])
@pytest.mark.parametrize("hq,hkv,d", [(8, 2, 32), (6, 3, 16)])
def test_matches_reference(device, gen, dtype, cache_dtype, hq, hkv, d):
    n = 13
    qkv = randn(gen, n, hq + 2 * hkv, d, dtype=dtype, device=device, scale=3.0)
    ang = torch.rand(n, d // 2, generator=gen) * 6.3
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(device=device, dtype=dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(device=device, dtype=dtype)
    slots = torch.randperm(NB * BS, generator=gen)[:n]
    slots[[1, 7]] = -1
    slots = slots.to(device)
    a, b = poisoned_cache(cache_dtype, hkv, d, device), poisoned_cache(cache_dtype, hkv, d, device)
    q_ref = rope_write_kv_ref(qkv, hq, hkv, cos, sin, *a, slots)
    q = rope_write_kv_triton(qkv, hq, hkv, cos, sin, *b, slots)
    assert q.shape == (n, hq, d) and q.dtype == dtype
    # float32 and a single rounding on both sides; the interpreter rounds to bf16 its own way
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(q.float(), q_ref.float(), rtol=tol, atol=tol)
    for x, y in zip(a[:2], b[:2]):
        assert torch.equal(is_poison(x), is_poison(y))     # the same slots written, all of them
    written = torch.zeros(NB * BS, dtype=torch.bool, device=device)
    written[slots[slots >= 0]] = True
    for c in b[:2]:
        flat = is_poison(c).reshape(NB * BS, -1)
        assert not flat[written].any() and flat[~written].all()
    qtol = tol if cache_dtype != torch.int8 else 3e-2      # one int8 step of a possibly different scale
    for i in range(2):
        x = _dequant(a[i], a[2 + i] if cache_dtype == torch.int8 else None).reshape(NB * BS, hkv, d)[written]
        y = _dequant(b[i], b[2 + i] if cache_dtype == torch.int8 else None).reshape(NB * BS, hkv, d)[written]
        torch.testing.assert_close(y, x, rtol=qtol, atol=qtol * x.abs().max().item())
