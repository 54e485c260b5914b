"""Paged decode attention in Triton, flash-decoding style.

Stage 1 splits every sequence's KV into chunks of a fixed number of tokens (a constant per
cache dtype, so a sequence's result never depends on what else is in the batch) and computes, per (sequence, kv head,
split), the partial output of all q heads sharing that kv head plus their log-sum-exp: each
KV block is read once per kv head. Stage 2 merges a sequence's splits in order by log-sum-exp.
The grid is sized from block_tables' width rather than the longest sequence, so no host
synchronisation is needed and the launch is CUDA-graph friendly; splits past a sequence's
end exit at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from engine.kernels import checks

SPLIT_TOKENS = 256
MERGE_CHUNK = 16        # DecodeConfig's default splits merged per step of stage 2
LOG2E = 1.4426950408889634


def _interpreting() -> bool:
    # Triton's CPU interpreter multiplies bf16/fp16 dot operands as raw bits (triton 3.6),
    # so interpreted runs take the float32 dot; compiled runs keep bf16 on the tensor cores.
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


@dataclass(frozen=True)
class DecodeConfig:
    """Launch parameters; chosen per cache dtype, never per batch (see engine/benchmarks/kernels.py)."""
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 2
    split_tokens: int = SPLIT_TOKENS
    early_v: bool = False   # issue the V tile's load with K's, before the scores: more bytes in flight
    merge_chunk: int = MERGE_CHUNK   # splits stage 2 merges a step; a constant, for batch invariance
    narrow_offsets: bool = False   # 32-bit KV addresses while the caches have under 2**31 elements

    def __post_init__(self) -> None:
        if self.split_tokens % self.block_n:
            raise ValueError(f"split_tokens {self.split_tokens} is not a multiple of block_n {self.block_n}")
        if self.merge_chunk < 1 or self.merge_chunk & (self.merge_chunk - 1):
            raise ValueError(f"merge_chunk must be a power of two, got {self.merge_chunk}")


# Keyed by "cache is int8"; measured on an H200 (8B shape), figures in docs/perf/kernels.md.
# bf16: engine.benchmarks.kernels --sweep's pick (best summed relative time at 1K and 32K, batch 1).
# int8: the best of engine.benchmarks.kernels --int8-candidates (int8 / bf16 time at 32K, batch 1 and 8,
# plus a quarter of it at 1K). Two warps a program, not four, were faster at 32K: fewer warps
# share the 16-row score tile, so fewer of its row maxima and sums and of P's moves into the
# P @ V product cross warps (inferred, not profiled). Its split (384 tokens, still a fixed count)
# is longer than bf16's: at batch 1 the time follows the number of splits more than the bytes.
# Both merge 64 splits a step: 32K context has 86-128 splits, which 16 a step walked in 6-8
# dependent rounds. Only int8 forms its KV addresses in 32 bits (narrow_offsets): its loop loses
# the 64-bit address arithmetic, while bf16 gained 0.2% from it and the float32 kernel (the
# reference model's) spilled more.
DEFAULT_CONFIGS = {
    False: DecodeConfig(block_n=128, num_warps=4, num_stages=3, split_tokens=256, merge_chunk=64),
    True: DecodeConfig(block_n=64, num_warps=2, num_stages=2, split_tokens=384, early_v=True, merge_chunk=64,
                       narrow_offsets=True),
}


# The strides that follow the block table's width (its row stride; the LSE buffer's, splits x
# heads) are not specialized: Triton would key each on divisibility by 16 and on equality to 1,
# which multiplied the AOT registry's entries by the widths' classes (aot_registry). They only
# address the block-table gathers and the split LSEs; the KV loads' offsets are
# constexpr-shaped and keep their vectorized form.
@triton.jit(do_not_specialize=["stride_btb", "stride_lb", "stride_lh"])
def _decode_split_kernel(
        q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, bt_ptr, sl_ptr, po_ptr, plse_ptr,
        stride_qb, stride_qh, stride_btb, stride_pb, stride_ph, stride_ps, stride_lb, stride_lh,
        qk_scale, num_kv_heads,
        G: tl.constexpr, G_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
        PAGE: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr,
        IS_INT8: tl.constexpr, DOT_F32: tl.constexpr, EARLY_V: tl.constexpr, OFF64: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    s = tl.program_id(2)
    seq_len = tl.load(sl_ptr + b)
    start = s * SPLIT
    if start >= seq_len:
        return
    end = tl.minimum(start + SPLIT, seq_len)

    g = tl.arange(0, G_PAD)
    d = tl.arange(0, BLOCK_D)
    heads = kvh * G + g
    gmask = g < G
    if HEAD_DIM == BLOCK_D:
        qmask = gmask[:, None]
    else:
        qmask = gmask[:, None] & (d[None, :] < HEAD_DIM)
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + d[None, :], mask=qmask, other=0.0)
    if DOT_F32:
        q = q.to(tl.float32)
    if IS_INT8:
        # The scores as int8 tensor-core products against K as stored: q ~ s * (254 q_hi + q_lo)
        # with s = max|q| / (127 * 254) per head, two int8 halves summed exactly in int32, so
        # no K element is converted (docs/perf/kernels.md). |q - s (254 q_hi + q_lo)| <= s / 2.
        qf = q.to(tl.float32)
        q_step = tl.maximum(tl.max(tl.abs(qf), axis=1), 1e-30) / 127.0
        q_hi_f = tl.floor(qf / q_step[:, None] + 0.5)
        q_hi = q_hi_f.to(tl.int8)
        q_lo = tl.floor((qf - q_hi_f * q_step[:, None]) * (254.0 / q_step[:, None]) + 0.5).to(tl.int8)
        q_scale = q_step * (qk_scale / 254.0)

    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, BLOCK_D], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    bt_row = bt_ptr + b * stride_btb
    # A constant trip count (masked past `end`) lets the compiler pipeline the loads.
    for n0 in range(0, SPLIT, BLOCK_N):
        t = start + n0 + offs_n
        tmask = t < end
        blk = tl.load(bt_row + t // PAGE, mask=tmask, other=0)
        if OFF64:
            blk = blk.to(tl.int64)
        row = blk * PAGE + t % PAGE                       # slot of each token
        head_row = row * num_kv_heads + kvh
        if HEAD_DIM == BLOCK_D:
            kvmask = tmask[:, None]
        else:
            kvmask = tmask[:, None] & (d[None, :] < HEAD_DIM)
        kv_off = head_row[:, None] * HEAD_DIM + d[None, :]
        k = tl.load(kc_ptr + kv_off, mask=kvmask, other=0)
        if IS_INT8:
            # V is page-transposed (cache_layout): gathered page by page as [pages, dim, token],
            # each page's tokens contiguous, with a mask constant along them so the loads stay
            # vectorised. Tokens past `end` in a valid page are read and get p = 0 exactly.
            pg = (start + n0) // PAGE + tl.arange(0, BLOCK_N // PAGE)
            pvalid = pg * PAGE < end
            pblk = tl.load(bt_row + pg, mask=pvalid, other=0)
            if OFF64:
                pblk = pblk.to(tl.int64)
            v_off = ((pblk * num_kv_heads + kvh) * (HEAD_DIM * PAGE))[:, None, None] + \
                (d * PAGE)[None, :, None] + tl.arange(0, PAGE)[None, None, :]
            if HEAD_DIM == BLOCK_D:
                v_mask = pvalid[:, None, None]
            else:
                v_mask = pvalid[:, None, None] & (d < HEAD_DIM)[None, :, None]
        if EARLY_V:
            if IS_INT8:
                v = tl.load(vc_ptr + v_off, mask=v_mask, other=0)
            else:
                v = tl.load(vc_ptr + kv_off, mask=kvmask, other=0)
        if IS_INT8:
            kt = tl.trans(k)
            qk_i = tl.dot(q_hi, kt, out_dtype=tl.int32) * 254
            qk_i = tl.dot(q_lo, kt, acc=qk_i, out_dtype=tl.int32)
            k_s = tl.load(ks_ptr + head_row, mask=tmask, other=0.0)
            qk = qk_i.to(tl.float32) * q_scale[:, None] * k_s[None, :]
        else:
            qk = tl.dot(q, tl.trans(k.to(q.dtype)), input_precision="ieee" if DOT_F32 else "tf32") * qk_scale
        qk = tl.where(tmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if not EARLY_V:
            if IS_INT8:
                v = tl.load(vc_ptr + v_off, mask=v_mask, other=0)
            else:
                v = tl.load(vc_ptr + kv_off, mask=kvmask, other=0)
        if IS_INT8:
            v_s = tl.load(vs_ptr + head_row, mask=tmask, other=0.0)
            p = p * v_s[None, :]
            v = tl.trans(tl.reshape(tl.permute(v, (1, 0, 2)), (BLOCK_D, BLOCK_N)))   # [token, dim]
        acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v.to(q.dtype),
                                            input_precision="ieee" if DOT_F32 else "tf32")
        m_i = m_new

    out = acc / l_i[:, None]
    po = po_ptr + b * stride_pb + heads[:, None] * stride_ph + s * stride_ps + d[None, :]
    tl.store(po, out, mask=qmask)
    tl.store(plse_ptr + b * stride_lb + heads * stride_lh + s, m_i + tl.math.log2(l_i), mask=gmask)


@triton.jit
def _merge_chunk(po_ptr, lse_row, base, stride_ps, c, num_splits, d, dmask,
                 CHUNK: tl.constexpr):
    """Splits c*CHUNK.. of one (sequence, head): lse [CHUNK] (-inf past the end), o [CHUNK, D]."""
    sp = c * CHUNK + tl.arange(0, CHUNK)
    smask = sp < num_splits
    lse = tl.load(lse_row + sp, mask=smask, other=float("-inf"))
    o = tl.load(po_ptr + base + sp[:, None] * stride_ps + d[None, :],
                mask=smask[:, None] & dmask[None, :], other=0.0)
    return lse, o


@triton.jit(do_not_specialize=["stride_lb", "stride_lh"])   # as _decode_split_kernel's
def _decode_merge_kernel(po_ptr, plse_ptr, sl_ptr, out_ptr,
                         stride_pb, stride_ph, stride_ps, stride_lb, stride_lh, stride_ob, stride_oh,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, SPLIT: tl.constexpr,
                         CHUNK: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, BLOCK_D)
    dmask = d < HEAD_DIM
    seq_len = tl.load(sl_ptr + b)
    num_splits = tl.cdiv(seq_len, SPLIT)
    dst = out_ptr + b * stride_ob + h * stride_oh + d
    if num_splits <= 0:
        tl.store(dst, tl.zeros([BLOCK_D], tl.float32).to(out_ptr.dtype.element_ty), mask=dmask)
        return
    base = b * stride_pb + h * stride_ph
    lse_row = plse_ptr + b * stride_lb + h * stride_lh
    # Splits merge CHUNK at a time (a constant) and chunks strictly in order, so the sum
    # depends only on this sequence, never on the batch; masked splits add exact zeros.
    lse, o = _merge_chunk(po_ptr, lse_row, base, stride_ps, 0, num_splits, d, dmask, CHUNK)
    m = tl.max(lse, axis=0)
    w = tl.math.exp2(lse - m)
    acc = tl.sum(o * w[:, None], axis=0)
    w_sum = tl.sum(w, axis=0)
    # A while loop: Triton's interpreter cannot take a loaded value as a range() bound
    # under numpy 2.x.
    c = 1
    while c * CHUNK < num_splits:
        lse, o = _merge_chunk(po_ptr, lse_row, base, stride_ps, c, num_splits, d, dmask, CHUNK)
        m_new = tl.maximum(m, tl.max(lse, axis=0))
        a = tl.math.exp2(m - m_new)
        w = tl.math.exp2(lse - m_new)
        acc = acc * a + tl.sum(o * w[:, None], axis=0)
        w_sum = w_sum * a + tl.sum(w, axis=0)
        m = m_new
        c += 1
    tl.store(dst, (acc / w_sum).to(out_ptr.dtype.element_ty), mask=dmask)


def wide_offsets(cfg: DecodeConfig, k_cache: torch.Tensor, v_cache: torch.Tensor) -> bool:
    """Whether stage 1 forms its KV addresses in 64 bits: always, unless the config asks for
    32-bit ones and every element of both caches is addressable with them."""
    return not (cfg.narrow_offsets and max(k_cache.numel(), v_cache.numel()) < 2**31)


def paged_decode_attention_triton(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens,
                                  sm_scale: float, config: DecodeConfig | None = None,
                                  out: torch.Tensor | None = None) -> torch.Tensor:
    """Same contract as reference.paged_decode_attention_ref, on the Triton kernels.

    ``out`` (optional, shaped and typed like q) receives the result; tests pass a poisoned one.
    """
    is_int8 = checks.check_decode(q, k_cache, v_cache, k_scale, v_scale, block_tables, seq_lens)
    cfg = config or DEFAULT_CONFIGS[is_int8]
    batch, hq, d = q.shape
    _, page, hkv, _ = k_cache.shape
    if out is None:
        out = torch.empty_like(q)
    else:
        checks.expect("paged_decode_attention", "out", out, shape=tuple(q.shape), dtypes=(q.dtype,),
                      device=q.device)
        if out.stride(2) != 1:
            raise checks.KernelInputError("paged_decode_attention", "out", "the head_dim axis must be contiguous")
    if batch == 0 or hq == 0:
        return out
    if q.stride(2) != 1:
        raise checks.KernelInputError("paged_decode_attention", "q", "the head_dim axis must be contiguous")
    if block_tables.stride(1) != 1:
        raise checks.KernelInputError("paged_decode_attention", "block_tables", "rows must be contiguous")
    if is_int8 and (page & (page - 1) or cfg.block_n % page):
        raise checks.KernelInputError("paged_decode_attention", "k_cache",
                                      f"an int8 cache's block_size must be a power of two dividing "
                                      f"{cfg.block_n} (V is read page by page), got {page}")
    g = hq // hkv
    block_d = max(32 if is_int8 else 16, triton.next_power_of_2(d))   # an int8 dot reduces >= 32
    max_splits = max(1, triton.cdiv(block_tables.shape[1] * page, cfg.split_tokens))
    partial = torch.empty((batch, hq, max_splits, d), dtype=torch.float32, device=q.device)
    lse = torch.empty((batch, hq, max_splits), dtype=torch.float32, device=q.device)
    sp_b, sp_h, sp_s = partial.stride(0), partial.stride(1), partial.stride(2)
    ks = k_scale if is_int8 else k_cache   # unused placeholders keep one signature
    vs = v_scale if is_int8 else v_cache
    _decode_split_kernel[(batch, hkv, max_splits)](
        q, k_cache, v_cache, ks, vs, block_tables, seq_lens, partial, lse,
        q.stride(0), q.stride(1), block_tables.stride(0), sp_b, sp_h, sp_s,
        lse.stride(0), lse.stride(1), float(sm_scale) * LOG2E, hkv,
        G=g, G_PAD=max(16, triton.next_power_of_2(g)), HEAD_DIM=d, BLOCK_D=block_d,
        PAGE=page, BLOCK_N=cfg.block_n, SPLIT=cfg.split_tokens, IS_INT8=is_int8,
        DOT_F32=q.dtype == torch.float32 or _interpreting(), EARLY_V=cfg.early_v,
        OFF64=wide_offsets(cfg, k_cache, v_cache),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    _decode_merge_kernel[(batch, hq)](
        partial, lse, seq_lens, out, sp_b, sp_h, sp_s, lse.stride(0), lse.stride(1),
        out.stride(0), out.stride(1),
        HEAD_DIM=d, BLOCK_D=triton.next_power_of_2(d), SPLIT=cfg.split_tokens, CHUNK=cfg.merge_chunk,
        num_warps=4)
    return out


__all__ = ["SPLIT_TOKENS", "DecodeConfig", "DEFAULT_CONFIGS", "paged_decode_attention_triton", "wide_offsets"]
