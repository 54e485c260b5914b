"""Triton matrix-vector products for decode, with the RMSNorm or SwiGLU gate that feeds them
folded into the weight stream.

At decode a linear layer multiplies a few rows (the batch) by a weight matrix read once from
memory: its time is the weight's bytes over the bandwidth. The small kernels around it (the
residual add with its RMSNorm, SwiGLU's silu(gate) * up) each cost a launch and a few
microseconds a layer. Here they run inside the product instead:

  norm_linear:  summed = x + residual;  y = (norm_w * rms_norm(summed)) @ w.T (+ bias)
  silu_linear:  y = (silu(gate) * up) @ w.T,  gate_up = [gate | up]

One program computes BLOCK_N outputs of every row. It reads the rows' input first (a few KB,
from L2) for the norm's sum of squares, then streams its BLOCK_N weight rows once. The input
is rounded as transformers rounds it (bf16 sum, float32 normalise, bf16 cast, bf16 weight
product), so only the product's summation order differs from a cuBLAS call. The product is
`w_tile @ x_tile.T` ("swap AB"): the weight is the MMA's row-major A operand as it lies in memory.
Program 0 also stores `summed`, the new residual. K (the input width) is a compile-time
constant: a model has two or three, and constant loop bounds keep the weight loads pipelined.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from engine.kernels import checks
from engine.kernels.ops import GEMV_MAX_ROWS as MAX_ROWS, _interpreting


@dataclass(frozen=True)
class GemvConfig:
    block_n: int = 32
    block_k: int = 256
    num_warps: int = 4
    num_stages: int = 4


# Pinned, not autotuned at run time: a config decides the summation order, and a release's
# outputs must not depend on which config won a timing race on the day. Chosen on an H200
# by `python -m engine.kernels.bench_gemv` (docs/perf/kernels.md).
DEFAULT_CONFIG = GemvConfig()


@triton.jit
def _load_rows(x_ptr, r_ptr, rm, rk, mask, stride_x, stride_r, HAS_RES: tl.constexpr):
    """The input rows' [BLOCK_M, BLOCK_K] tile: x, or x + residual rounded to x's dtype."""
    xs = tl.load(x_ptr + rm[:, None] * stride_x + rk[None, :], mask=mask, other=0.0)
    if HAS_RES:
        r = tl.load(r_ptr + rm[:, None] * stride_r + rk[None, :], mask=mask, other=0.0)
        xs = (xs.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)
    return xs


@triton.jit
def _norm_gemv_kernel(x_ptr, r_ptr, nw_ptr, w_ptr, b_ptr, y_ptr, s_ptr,
                      M, N, stride_x, stride_r, stride_w, stride_y, stride_s, eps, K: tl.constexpr,
                      HAS_RES: tl.constexpr, HAS_BIAS: tl.constexpr, DOT_F32: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)
    mmask = rm < M
    dt = x_ptr.dtype.element_ty
    ss = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        mask = mmask[:, None] & (rk[None, :] < K)
        xs = _load_rows(x_ptr, r_ptr, rm, rk, mask, stride_x, stride_r, HAS_RES)
        xf = xs.to(tl.float32)
        ss += tl.sum(xf * xf, axis=1)
        if HAS_RES:
            tl.store(s_ptr + rm[:, None] * stride_s + rk[None, :], xs, mask=mask & (pid == 0))
    inv = tl.rsqrt(ss / K + eps)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = rn < N
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        kmask = rk < K
        w = tl.load(w_ptr + rn[:, None] * stride_w + rk[None, :], mask=nmask[:, None] & kmask[None, :], other=0.0)
        xs = _load_rows(x_ptr, r_ptr, rm, rk, mmask[:, None] & kmask[None, :], stride_x, stride_r, HAS_RES)
        nw = tl.load(nw_ptr + rk, mask=kmask, other=0.0)
        a = (xs.to(tl.float32) * inv[:, None]).to(dt)
        a = (nw.to(tl.float32)[None, :] * a.to(tl.float32)).to(dt)
        if DOT_F32:
            acc += tl.dot(w.to(tl.float32), tl.trans(a.to(tl.float32)), input_precision="ieee")
        else:
            acc += tl.dot(w, tl.trans(a))
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=nmask, other=0.0).to(tl.float32)[:, None]
    tl.store(y_ptr + rm[None, :] * stride_y + rn[:, None], acc.to(dt), mask=nmask[:, None] & mmask[None, :])


@triton.jit
def _silu_gemv_kernel(g_ptr, w_ptr, y_ptr, M, N, stride_g, stride_w, stride_y, K: tl.constexpr,
                      DOT_F32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)
    mmask = rm < M
    dt = g_ptr.dtype.element_ty
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = rn < N
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        kmask = rk < K
        w = tl.load(w_ptr + rn[:, None] * stride_w + rk[None, :], mask=nmask[:, None] & kmask[None, :], other=0.0)
        mask = mmask[:, None] & kmask[None, :]
        gate = tl.load(g_ptr + rm[:, None] * stride_g + rk[None, :], mask=mask, other=0.0).to(tl.float32)
        up = tl.load(g_ptr + rm[:, None] * stride_g + K + rk[None, :], mask=mask, other=0.0).to(tl.float32)
        a = (gate / (1.0 + tl.exp(-gate)) * up).to(dt)
        if DOT_F32:
            acc += tl.dot(w.to(tl.float32), tl.trans(a.to(tl.float32)), input_precision="ieee")
        else:
            acc += tl.dot(w, tl.trans(a))
    tl.store(y_ptr + rm[None, :] * stride_y + rn[:, None], acc.to(dt), mask=nmask[:, None] & mmask[None, :])


def _block_m(m: int) -> int:
    return max(16, triton.next_power_of_2(m))


def _dot_f32(dtype: torch.dtype) -> bool:
    return dtype == torch.float32 or _interpreting()


def _check_decode_rows(op: str, name: str, x: torch.Tensor) -> None:
    if x.shape[0] > MAX_ROWS:
        raise checks.KernelInputError(op, name, f"at most {MAX_ROWS} rows (decode), got {x.shape[0]}")


def norm_linear_triton(x, residual, norm_w, eps: float, w, bias=None, config: GemvConfig | None = None):
    """Same contract as reference.norm_linear_ref: returns (y [M, N], summed [M, K])."""
    checks.check_norm_linear(x, residual, norm_w, w, bias)
    _check_decode_rows("norm_linear", "x", x)
    k = w.shape[1]
    cfg = config or DEFAULT_CONFIG
    m, n = x.shape[0], w.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    summed = torch.empty_like(x) if residual is not None else x
    if m == 0:
        return y, summed
    _norm_gemv_kernel[(triton.cdiv(n, cfg.block_n),)](
        x, residual if residual is not None else x, norm_w, w, bias if bias is not None else w, y, summed,
        m, n, x.stride(0), residual.stride(0) if residual is not None else 0, w.stride(0), y.stride(0),
        summed.stride(0), float(eps), K=k,
        HAS_RES=residual is not None, HAS_BIAS=bias is not None, DOT_F32=_dot_f32(x.dtype),
        BLOCK_M=_block_m(m), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return y, summed


def silu_linear_triton(gate_up, w, config: GemvConfig | None = None):
    """Same contract as reference.silu_linear_ref: y = (silu(gate) * up) @ w.T."""
    checks.check_silu_linear(gate_up, w)
    _check_decode_rows("silu_linear", "gate_up", gate_up)
    k = w.shape[1]
    cfg = config or DEFAULT_CONFIG
    m, n = gate_up.shape[0], w.shape[0]
    y = torch.empty((m, n), dtype=gate_up.dtype, device=gate_up.device)
    if m == 0:
        return y
    _silu_gemv_kernel[(triton.cdiv(n, cfg.block_n),)](
        gate_up, w, y, m, n, gate_up.stride(0), w.stride(0), y.stride(0), K=k,
        DOT_F32=_dot_f32(gate_up.dtype), BLOCK_M=_block_m(m), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return y


__all__ = ["MAX_ROWS", "GemvConfig", "DEFAULT_CONFIG", "norm_linear_triton", "silu_linear_triton"]
