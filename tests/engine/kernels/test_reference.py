"""The PyTorch references (decode and the prefill implementation) against naive float64 attention."""

from __future__ import annotations

import math

import pytest
import torch

from engine.kernels.errors import KernelInputError
from engine.kernels.reference import paged_decode_attention_ref, paged_prefill_attention_ref
from tests.engine.kernels.paged_inputs import build, randn, rel_err


def naive(q, k, v, positions, sm_scale):
    """q [n, Hq, D] at `positions` over dense k, v [T, Hkv, D]; float64, one query at a time."""
    hq, hkv = q.shape[1], k.shape[1]
    k = k.double().repeat_interleave(hq // hkv, dim=1)
    v = v.double().repeat_interleave(hq // hkv, dim=1)
    out = torch.empty(q.shape, dtype=torch.float64)
    for i, pos in enumerate(positions):
        s = torch.einsum("hd,thd->ht", q[i].double(), k[: pos + 1]) * sm_scale
        out[i] = torch.einsum("ht,thd->hd", torch.softmax(s, -1), v[: pos + 1])
    return out


def dequantized(p, b):
    """Sequence b's KV as the cache holds it (after int8 rounding, if any), float32."""
    n, bs = int(p.seq_lens[b]), p.k_cache.shape[1]
    pos = torch.arange(n)
    blk, off = p.block_tables[b, pos // bs].long(), pos % bs
    k, v = p.k_cache[blk, off].float(), p.v_cache[blk, off].float()
    if p.k_scale is not None:
        k, v = k * p.k_scale[blk, off][..., None], v * p.v_scale[blk, off][..., None]
    return k, v


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.int8])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2), (16, 2)])
def test_decode_ref_matches_naive(gen, cache_dtype, hq, hkv):
    lens, d = [1, 40, 300], 32
    p = build(gen, lens, num_kv_heads=hkv, head_dim=d, cache_dtype=cache_dtype, width=24)
    q = randn(gen, len(lens), hq, d)
    out = paged_decode_attention_ref(q, *p.cache_args(), p.block_tables, p.seq_lens, 0.3)
    for b, n in enumerate(lens):
        k, v = dequantized(p, b)
        assert rel_err(out[b], naive(q[b:b + 1], k, v, [n - 1], 0.3)[0]) < 1e-5


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.int8])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2), (16, 2)])
@pytest.mark.parametrize("start_pos,chunk", [(0, 37), (20, 45), (45, 20), (16, 1)])
def test_prefill_ref_matches_naive(gen, cache_dtype, hq, hkv, start_pos, chunk):
    d = 32
    p = build(gen, [start_pos + chunk], num_kv_heads=hkv, head_dim=d, cache_dtype=cache_dtype, width=10)
    q = randn(gen, chunk, hq, d)
    out = paged_prefill_attention_ref(q, *p.cache_args(), p.block_tables[0], start_pos, 1 / math.sqrt(d))
    k, v = dequantized(p, 0)
    want = naive(q, k, v, range(start_pos, start_pos + chunk), 1 / math.sqrt(d))
    assert out.shape == q.shape and rel_err(out, want) < 1e-5


# The CUDA path's own code (block gather, kv heads repeated for their q heads, causal aligned to the
# chunk's last row) runs on CPU tensors as well, where torch computes the lower-right causal bias
# without the fused kernels; on a GPU (ENGINE_TEST_DEVICE=cuda, this directory's `device`) the test
# above runs it through flash / memory-efficient attention.
@pytest.mark.parametrize("cache_dtype,qdtype,tol", [(torch.float32, torch.float32, 1e-5),
                                                    (torch.int8, torch.float32, 1e-5),
                                                    (torch.bfloat16, torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2)])
@pytest.mark.parametrize("start_pos,chunk", [(0, 37), (20, 45), (45, 20), (16, 1)])
def test_prefill_cuda_path_matches_naive(gen, cache_dtype, qdtype, tol, hq, hkv, start_pos, chunk):
    from engine.kernels.reference import _prefill_cuda
    d = 32
    p = build(gen, [start_pos + chunk], num_kv_heads=hkv, head_dim=d, cache_dtype=cache_dtype,
              compute_dtype=qdtype, width=10)
    q = randn(gen, chunk, hq, d, dtype=qdtype)
    blocks = p.block_tables[0, : -(-(start_pos + chunk) // 16)].long()
    out = _prefill_cuda(q, *p.cache_args(), blocks, start_pos, 1 / math.sqrt(d))
    k, v = dequantized(p, 0)
    want = naive(q, k, v, range(start_pos, start_pos + chunk), 1 / math.sqrt(d))
    assert out.shape == q.shape and out.dtype == qdtype and rel_err(out, want) < tol


@pytest.mark.parametrize("start_pos", [100, 300])    # a chunk longer than its prefix (padded), and not (masked)
def test_prefill_after_a_prefix_equals_one_pass_bit_for_bit(gen, start_pos):
    """A prompt prefilled in two chunks gives the second chunk's rows exactly as one pass does,
    whichever way the CPU path attends over the cached prefix: the lanes' context phase reuses a
    cached haystack and prefills only what follows, and its answers must not depend on that."""
    hq, hkv, d, n = 9, 3, 64, 500
    p = build(gen, [n], num_kv_heads=hkv, head_dim=d, cache_dtype=torch.float32, width=40)
    q = randn(gen, n, hq, d)
    one = paged_prefill_attention_ref(q, *p.cache_args(), p.block_tables[0], 0, d ** -0.5)
    two = paged_prefill_attention_ref(q[start_pos:], *p.cache_args(), p.block_tables[0], start_pos, d ** -0.5)
    assert torch.equal(two, one[start_pos:])


def test_prefill_last_row_equals_decode(gen):
    hq, hkv, d, n = 8, 2, 32, 70
    p = build(gen, [n], num_kv_heads=hkv, head_dim=d, cache_dtype=torch.bfloat16)
    q = randn(gen, 10, hq, d, dtype=torch.bfloat16)
    pre = paged_prefill_attention_ref(q, *p.cache_args(), p.block_tables[0], n - 10, 0.2)
    dec = paged_decode_attention_ref(q[-1:], *p.cache_args(), p.block_tables, p.seq_lens, 0.2)
    assert pre.dtype == torch.bfloat16
    assert rel_err(pre[-1], dec[0]) < 1e-2


def test_errors_name_the_argument(gen):
    p = build(gen, [20], num_kv_heads=2, head_dim=32)
    q = randn(gen, 1, 6, 32)
    bad = [
        (dict(q=randn(gen, 1, 5, 32)), "q", "multiple"),
        (dict(q=randn(gen, 1, 4, 16)), "q", "shape"),
        (dict(seq_lens=p.seq_lens.long()), "seq_lens", "dtype"),
        (dict(block_tables=p.block_tables[0]), "block_tables", "dimensions"),
        (dict(k_scale=torch.ones(3)), "k_scale", "takes no scales"),
    ]
    base = dict(q=q, k_cache=p.k_cache, v_cache=p.v_cache, k_scale=None, v_scale=None,
                block_tables=p.block_tables, seq_lens=p.seq_lens, sm_scale=0.1)
    for change, arg, words in bad:
        with pytest.raises(KernelInputError) as e:
            paged_decode_attention_ref(**{**base, **change})
        assert e.value.argument == arg and words in str(e.value), str(e.value)
    with pytest.raises(KernelInputError, match="cannot hold"):
        paged_prefill_attention_ref(randn(gen, 30, 4, 32), *p.cache_args(), p.block_tables[0], 10, 0.1)
    for bad_pos in (-1, 1.5, "2", True):
        with pytest.raises(KernelInputError, match="start_pos"):
            paged_prefill_attention_ref(randn(gen, 3, 4, 32), *p.cache_args(), p.block_tables[0], bad_pos, 0.1)


def test_prefill_start_pos_may_be_an_integer_tensor(gen):
    p = build(gen, [20], num_kv_heads=2, head_dim=32)
    q = randn(gen, 3, 4, 32)
    want = paged_prefill_attention_ref(q, *p.cache_args(), p.block_tables[0], 17, 0.1)
    got = paged_prefill_attention_ref(q, *p.cache_args(), p.block_tables[0], torch.tensor(17), 0.1)
    assert torch.equal(got, want)
