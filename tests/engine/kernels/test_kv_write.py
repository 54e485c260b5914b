"""Triton KV write against the reference: same bytes, only the mapped slots touched."""

from __future__ import annotations

import pytest
import torch

from engine.kernels.cache_layout import empty_cache
from engine.kernels.errors import KernelInputError
from engine.kernels.reference import quantize_int8, write_kv_ref
from engine.kernels.triton_kv_write import write_kv_triton
from tests.engine.kernels.paged_inputs import randn

NB, BS = 7, 16
POISON_INT8 = -128          # quantize_int8 clamps to [-127, 127], so -128 is never written


def poisoned_cache(dtype, hkv, d, device):
    shape = (NB, BS, hkv, d)
    if dtype == torch.int8:
        c = torch.full(shape, POISON_INT8, dtype=torch.int8, device=device)
        v = empty_cache(shape, torch.int8, device, v=True).fill_(POISON_INT8)   # page-transposed
        s = torch.full(shape[:3], float("nan"), device=device)
        return [c, v, s, s.clone()]
    c = torch.full(shape, float("nan"), dtype=dtype, device=device)
    return [c, c.clone(), None, None]


def is_poison(t):
    return t == POISON_INT8 if t.dtype == torch.int8 else torch.isnan(t)


@pytest.mark.parametrize("cache_dtype,kdtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                                (torch.bfloat16, torch.float32), (torch.int8, torch.float32),
                                                (torch.int8, torch.bfloat16)])
@pytest.mark.parametrize("hkv,d", [(2, 32), (3, 24)])
def test_kernel_writes_same_bytes_as_reference(device, gen, cache_dtype, kdtype, hkv, d):
    n = 21
    k = randn(gen, n, hkv, d, dtype=kdtype, device=device, scale=4.0)
    v = randn(gen, n, hkv, d, dtype=kdtype, device=device)
    slots = torch.randperm(NB * BS, generator=gen)[:n]
    slots[[2, 11]] = -1
    slots = slots.to(device)
    a, b = poisoned_cache(cache_dtype, hkv, d, device), poisoned_cache(cache_dtype, hkv, d, device)
    write_kv_ref(k, v, *a, slots)
    write_kv_triton(k, v, *b, slots)
    for x, y in zip(a, b):
        if x is not None:
            assert torch.equal(is_poison(x), is_poison(y))
            assert torch.equal(x[~is_poison(x)], y[~is_poison(y)])
    # Exactly the mapped slots changed, every element of them.
    written = torch.zeros(NB * BS, dtype=torch.bool, device=device)
    written[slots[slots >= 0]] = True
    for c in b[:2]:
        flat = is_poison(c).reshape(NB * BS, -1)
        assert not flat[written].any() and flat[~written].all()


def test_non_contiguous_token_axis(device, gen):
    """k and v may be column slices of a fused qkv projection output."""
    hkv, d, n = 2, 32, 9
    qkv = randn(gen, n, 3 * hkv, d, device=device)
    k, v = qkv[:, hkv:2 * hkv], qkv[:, 2 * hkv:]
    slots = torch.arange(n, device=device) * 3
    a, b = poisoned_cache(torch.int8, hkv, d, device), poisoned_cache(torch.int8, hkv, d, device)
    write_kv_ref(k, v, *a, slots)
    write_kv_triton(k, v, *b, slots)
    assert all(torch.equal(x.nan_to_num(), y.nan_to_num()) if x.is_floating_point() else torch.equal(x, y)
               for x, y in zip(a, b))


def test_quantize_int8_round_trip(gen):
    x = randn(gen, 50, 4, 64, scale=3.0)
    x[0, 0] = 0.0                                       # an all-zero row quantises to zeros
    q, s = quantize_int8(x)
    assert q.dtype == torch.int8 and s.shape == (50, 4)
    assert torch.equal(s, x.abs().amax(-1) / 127)
    assert int(q.abs().max()) == 127 and int(q.min()) >= -127
    assert torch.equal(q[0, 0], torch.zeros_like(q[0, 0]))
    err = (q.float() * s[..., None] - x).abs()
    assert bool((err <= s[..., None] / 2 * (1 + 1e-5)).all())       # within half a step


def test_int8_v_is_stored_page_transposed(device, gen):
    """Each block holds an int8 V as [kv head, dim, token]: one page's tokens are contiguous for
    each (head, dim), the layout the decode kernel reads V in (engine.kernels.cache_layout)."""
    hkv, d = 2, 32
    k, v = randn(gen, 1, hkv, d, device=device), randn(gen, 1, hkv, d, device=device)
    slot = 3 * BS + 5                                    # block 3, token 5
    c = poisoned_cache(torch.int8, hkv, d, device)
    write_kv_triton(k, v, *c, torch.tensor([slot], device=device))
    vq, _ = quantize_int8(v[0])
    storage = torch.as_strided(c[1], (NB, hkv, d, BS), (hkv * d * BS, d * BS, BS, 1))
    assert torch.equal(storage[3, :, :, 5], vq)
    assert int((storage != POISON_INT8).sum()) == hkv * d


def test_int8_v_cache_in_token_major_layout_is_refused(device, gen):
    k = randn(gen, 1, 2, 32, device=device)
    kc = torch.zeros(NB, BS, 2, 32, dtype=torch.int8, device=device)
    s = torch.zeros(NB, BS, 2, device=device)
    with pytest.raises(KernelInputError, match="v_cache.*page-transposed"):
        write_kv_triton(k, k, kc, kc.clone(), s, s.clone(), torch.zeros(1, dtype=torch.int64, device=device))
