"""Triton KV write: store new tokens' k, v into the paged cache, quantising when it is int8.

One program per token writes all kv heads of both k and v. The int8 path repeats
reference.quantize_int8's float32 steps (IEEE-rounded divisions, half away from zero), so
kernel and reference produce the same bytes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels import checks


@triton.jit
def _quantize(x):
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.math.div_rn(amax, tl.full(amax.shape, 127.0, tl.float32))
    safe = tl.where(scale > 0, scale, 1.0)
    y = tl.math.div_rn(x, tl.broadcast_to(safe[:, None], x.shape))
    q = tl.where(y >= 0, tl.floor(y + 0.5), -tl.floor(0.5 - y))
    q = tl.minimum(tl.maximum(q, -127.0), 127.0)
    return q.to(tl.int8), scale


@triton.jit
def _v_offsets(slot, h, d, sb, st, sh, sd, PAGE: tl.constexpr):
    """Element offsets [heads, dims] of one slot's V in a cache of strides (sb, st, sh, sd)."""
    return (slot // PAGE) * sb + (slot % PAGE) * st + h[:, None] * sh + d[None, :] * sd


@triton.jit
def _write_kv_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, slot_ptr,
                     stride_kt, stride_kh, stride_vt, stride_vh,
                     num_kv_heads, head_dim, vc_sb, vc_st, vc_sh, vc_sd,
                     IS_INT8: tl.constexpr, PAGE: tl.constexpr, BLOCK_H: tl.constexpr,
                     BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    if slot < 0:
        return
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    mask = (h[:, None] < num_kv_heads) & (d[None, :] < head_dim)
    k = tl.load(k_ptr + t * stride_kt + h[:, None] * stride_kh + d[None, :], mask=mask, other=0.0)
    v = tl.load(v_ptr + t * stride_vt + h[:, None] * stride_vh + d[None, :], mask=mask, other=0.0)
    # K is contiguous: a slot is num_kv_heads * head_dim elements wide. V goes by its strides
    # (block, token, head, dim): int8 V is page-transposed (cache_layout).
    dst = slot * num_kv_heads * head_dim + h[:, None] * head_dim + d[None, :]
    v_dst = _v_offsets(slot, h, d, vc_sb, vc_st, vc_sh, vc_sd, PAGE)
    if IS_INT8:
        kq, ks = _quantize(k.to(tl.float32))
        vq, vs = _quantize(v.to(tl.float32))
        tl.store(kc_ptr + dst, kq, mask=mask)
        tl.store(vc_ptr + v_dst, vq, mask=mask)
        hmask = h < num_kv_heads
        tl.store(ks_ptr + slot * num_kv_heads + h, ks, mask=hmask)
        tl.store(vs_ptr + slot * num_kv_heads + h, vs, mask=hmask)
    else:
        tl.store(kc_ptr + dst, k.to(kc_ptr.dtype.element_ty), mask=mask)
        tl.store(vc_ptr + v_dst, v.to(vc_ptr.dtype.element_ty), mask=mask)


def write_kv_triton(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping) -> None:
    """Same contract as reference.write_kv_ref, on the Triton kernel."""
    is_int8 = checks.check_write_kv(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping)
    num_tokens, hkv, d = k.shape
    if num_tokens == 0:
        return
    for name, x in (("k", k), ("v", v)):
        if x.stride(2) != 1:
            raise checks.KernelInputError("write_kv", name, "the head_dim axis must be contiguous")
    if not is_int8:
        # Cast on the host: Triton's interpreter rounds float32 -> bf16 unlike the GPU.
        k, v = k.to(k_cache.dtype), v.to(v_cache.dtype)
    ks = k_scale if is_int8 else k_cache   # unused placeholders keep one signature
    vs = v_scale if is_int8 else v_cache
    block_h, block_d = triton.next_power_of_2(hkv), triton.next_power_of_2(d)
    _write_kv_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, ks, vs, slot_mapping,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1), hkv, d, *v_cache.stride(),
        IS_INT8=is_int8, PAGE=k_cache.shape[1], BLOCK_H=block_h, BLOCK_D=block_d,
        num_warps=4 if block_h * block_d >= 1024 else 1)


@triton.jit
def _rope_write_kv_kernel(qkv_ptr, cos_ptr, sin_ptr, q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, slot_ptr,
                          stride_t, stride_h, stride_ct, stride_st, stride_qt, stride_qh,
                          num_heads, num_kv_heads, head_dim, vc_sb, vc_st, vc_sh, vc_sd,
                          IS_INT8: tl.constexpr, PAGE: tl.constexpr, BLOCK_HQ: tl.constexpr,
                          BLOCK_HK: tl.constexpr, BLOCK_D: tl.constexpr, HALF: tl.constexpr):
    """One token: rotate its q and k heads (x*cos + rotate_half(x)*sin in float32, rounded
    once to q's dtype, as the compiled elementwise RoPE does), store q, and write k, v."""
    t = tl.program_id(0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < head_dim
    partner = tl.where(d < HALF, d + HALF, d - HALF)
    sign = tl.where(d < HALF, -1.0, 1.0)
    c = tl.load(cos_ptr + t * stride_ct + d, mask=dmask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + t * stride_st + d, mask=dmask, other=0.0).to(tl.float32) * sign
    row = qkv_ptr + t * stride_t
    hq = tl.arange(0, BLOCK_HQ)
    qmask = (hq[:, None] < num_heads) & dmask[None, :]
    x = tl.load(row + hq[:, None] * stride_h + d[None, :], mask=qmask, other=0.0).to(tl.float32)
    xr = tl.load(row + hq[:, None] * stride_h + partner[None, :], mask=qmask, other=0.0).to(tl.float32)
    q = x * c[None, :] + xr * s[None, :]
    tl.store(q_ptr + t * stride_qt + hq[:, None] * stride_qh + d[None, :], q.to(q_ptr.dtype.element_ty),
             mask=qmask)
    slot = tl.load(slot_ptr + t)
    if slot < 0:
        return
    hk = tl.arange(0, BLOCK_HK)
    kmask = (hk[:, None] < num_kv_heads) & dmask[None, :]
    krow = row + num_heads * stride_h
    x = tl.load(krow + hk[:, None] * stride_h + d[None, :], mask=kmask, other=0.0).to(tl.float32)
    xr = tl.load(krow + hk[:, None] * stride_h + partner[None, :], mask=kmask, other=0.0).to(tl.float32)
    k = (x * c[None, :] + xr * s[None, :]).to(q_ptr.dtype.element_ty)
    v = tl.load(krow + (num_kv_heads + hk[:, None]) * stride_h + d[None, :], mask=kmask, other=0.0)
    dst = slot * num_kv_heads * head_dim + hk[:, None] * head_dim + d[None, :]
    v_dst = _v_offsets(slot, hk, d, vc_sb, vc_st, vc_sh, vc_sd, PAGE)
    if IS_INT8:
        kq, ksc = _quantize(k.to(tl.float32))
        vq, vsc = _quantize(v.to(tl.float32))
        tl.store(kc_ptr + dst, kq, mask=kmask)
        tl.store(vc_ptr + v_dst, vq, mask=kmask)
        hmask = hk < num_kv_heads
        tl.store(ks_ptr + slot * num_kv_heads + hk, ksc, mask=hmask)
        tl.store(vs_ptr + slot * num_kv_heads + hk, vsc, mask=hmask)
    else:
        tl.store(kc_ptr + dst, k.to(kc_ptr.dtype.element_ty), mask=kmask)
        tl.store(vc_ptr + v_dst, v.to(vc_ptr.dtype.element_ty), mask=kmask)


def rope_write_kv_triton(qkv, num_heads, num_kv_heads, cos, sin, k_cache, v_cache, k_scale, v_scale,
                         slot_mapping) -> torch.Tensor:
    """Same contract as reference.rope_write_kv_ref, in one Triton kernel: returns rotated q."""
    n, heads, d = qkv.shape
    if heads != num_heads + 2 * num_kv_heads or d % 2:
        raise checks.KernelInputError("rope_write_kv", "qkv", f"expected [N, {num_heads + 2 * num_kv_heads}, "
                                      f"even head_dim], got {tuple(qkv.shape)}")
    q = torch.empty((n, num_heads, d), dtype=qkv.dtype, device=qkv.device)
    k, v = qkv[:, num_heads:num_heads + num_kv_heads], qkv[:, num_heads + num_kv_heads:]
    is_int8 = checks.check_write_kv(k, v, k_cache, v_cache, k_scale, v_scale, slot_mapping)
    if n == 0:
        return q
    if qkv.stride(2) != 1 or cos.stride(1) != 1 or sin.stride(1) != 1:
        raise checks.KernelInputError("rope_write_kv", "qkv", "the head_dim axis must be contiguous")
    if not is_int8 and k_cache.dtype != qkv.dtype:
        raise checks.KernelInputError("rope_write_kv", "k_cache", "a float cache must have qkv's dtype")
    ks = k_scale if is_int8 else k_cache
    vs = v_scale if is_int8 else v_cache
    _rope_write_kv_kernel[(n,)](
        qkv, cos, sin, q, k_cache, v_cache, ks, vs, slot_mapping,
        qkv.stride(0), qkv.stride(1), cos.stride(0), sin.stride(0), q.stride(0), q.stride(1),
        num_heads, num_kv_heads, d, *v_cache.stride(),
        IS_INT8=is_int8, PAGE=k_cache.shape[1], BLOCK_HQ=triton.next_power_of_2(num_heads),
        BLOCK_HK=triton.next_power_of_2(num_kv_heads), BLOCK_D=triton.next_power_of_2(d), HALF=d // 2,
        num_warps=4)
    return q
