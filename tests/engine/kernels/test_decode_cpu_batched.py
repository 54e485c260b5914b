"""The CPU reference's batched decode path (one attention call for a batch of short sequences)
against its per-sequence path and against plain float64 attention."""

from __future__ import annotations

import math

import pytest
import torch

from engine.kernels import reference
from engine.kernels.reference import paged_decode_attention_ref
from tests.engine.kernels.paged_inputs import build, randn


def _dense(q, p, lens, sm_scale):
    """Plain attention in float64, per sequence, from the cache through its block table."""
    hq, d = q.shape[1], q.shape[2]
    k_cache, v_cache, k_scale, v_scale = p.cache_args()
    bs, hkv = k_cache.shape[1], k_cache.shape[2]
    out = torch.zeros(len(lens), hq, d, dtype=torch.float64)
    for b, n in enumerate(lens):
        if n == 0:
            continue
        pos = torch.arange(n)
        blk, off = p.block_tables[b, pos // bs].long(), pos % bs
        k, v = k_cache[blk, off].double(), v_cache[blk, off].double()
        if k_scale is not None:
            k, v = k * k_scale[blk, off].double()[..., None], v * v_scale[blk, off].double()[..., None]
        k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
        s = torch.einsum("hd,thd->ht", q[b].double(), k) * sm_scale
        out[b] = torch.einsum("ht,thd->hd", torch.softmax(s, dim=-1), v)
    return out


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.int8])
def test_batched_path_equals_per_sequence_path_and_dense(cache_dtype):
    gen = torch.Generator().manual_seed(7)
    lens = [37, 0, 1, 130, 16, 64]                  # an idle slot, block-boundary lengths, shuffled blocks
    hq, hkv, d = 9, 3, 64                           # the reference model's GQA shape
    p = build(gen, lens, num_kv_heads=hkv, head_dim=d, cache_dtype=cache_dtype)
    q = randn(gen, len(lens), hq, d)
    sm = 1 / math.sqrt(d)
    assert len(lens) * max(lens) <= reference.BATCHED_DECODE_MAX_TOKENS    # the batched path runs
    batched = paged_decode_attention_ref(q, *p.cache_args(), p.block_tables, p.seq_lens, sm)
    singles = torch.cat([paged_decode_attention_ref(q[b:b + 1], *p.cache_args(), p.block_tables[b:b + 1],
                                                    p.seq_lens[b:b + 1], sm) for b in range(len(lens))])
    assert torch.equal(batched[1], torch.zeros(hq, d))                      # seq_len 0: zeros
    torch.testing.assert_close(batched, singles, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(batched.double(), _dense(q, p, lens, sm), rtol=1e-4, atol=1e-4)


def test_past_the_threshold_each_sequence_is_attended_alone(monkeypatch):
    gen = torch.Generator().manual_seed(8)
    lens = [40, 90, 3]
    p = build(gen, lens, num_kv_heads=2, head_dim=32)
    q = randn(gen, len(lens), 4, 32)
    sm = 1 / math.sqrt(32)
    calls = []
    real = reference._decode_cpu_batched
    monkeypatch.setattr(reference, "_decode_cpu_batched", lambda *a: calls.append(1) or real(*a))
    batched = paged_decode_attention_ref(q, *p.cache_args(), p.block_tables, p.seq_lens, sm)
    assert calls == [1]
    monkeypatch.setattr(reference, "BATCHED_DECODE_MAX_TOKENS", 3 * 90 - 1)
    alone = paged_decode_attention_ref(q, *p.cache_args(), p.block_tables, p.seq_lens, sm)
    assert calls == [1]                             # the per-sequence path, not the batched one
    torch.testing.assert_close(alone, batched, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(alone.double(), _dense(q, p, lens, sm), rtol=1e-4, atol=1e-4)
