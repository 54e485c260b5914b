"""`python -m engine.benchmarks.gemv`: one-row decode products (GEMV) as split-K Triton kernels
against cuBLAS, on the 8B config's shapes, to see whether the decode step's projections could
leave cuBLAS (an experiment; the engine keeps cuBLAS: docs/perf/kernels.md).

Default: every launch config of a split-K kernel (plain FMA over the column-major weight [K, N]
that the engine keeps on CUDA, float32 partial sums per split) against `x @ Wt`, each timed as
a CUDA graph over enough weight copies to be several times the L2; the down projection's kernel
computes SwiGLU's gate on its input, and is compared with cuBLAS plus the gate's own kernel.

--chain: 64 dependent o-shaped products (each reads the previous one's output) in one graph:
cuBLAS, and the Triton kernel loading its weight slice before it waits for its input, with and
without programmatic dependent launch (PDL), which lets a kernel start while the one before it
finishes. Time per product.

--layers: 64 links of (a one-program RMS-norm kernel, an o-shaped product): the norm stands for
the small kernels between a decode step's projections; a product launched with PDL loads its
weights while the norm runs. Time per link, and the norm kernel alone."""
from __future__ import annotations

import argparse
import itertools
import json

import torch
import triton
import triton.language as tl

from engine.benchmarks.projections import graph_time

# (name, K, N): the 8B config's one-row products that cuBLAS runs below the copy rate, and
# gate_up for scale (docs/perf/engine.md, the step's profile).
SHAPES = [("qkv", 4096, 6144), ("o", 4096, 4096), ("down", 14336, 4096), ("gate_up", 4096, 28672)]
CHAIN = 64


@triton.jit
def _gemv_split(x_ptr, w_ptr, p_ptr, N, K: tl.constexpr, KS: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, SILU: tl.constexpr):
    """Partial sums of split program_id(1) (rows KS*s .. KS*(s+1) of w) for BN outputs."""
    pn = tl.program_id(0)
    ps = tl.program_id(1)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros([BK, BN], tl.float32)       # summed across rows once, after the loop
    for k0 in range(0, KS, BK):
        rk = ps * KS + k0 + tl.arange(0, BK)
        if SILU:    # x = [gate | up]: silu(gate) * up, rounded once to bf16 as the compiled gate does
            g = tl.load(x_ptr + rk).to(tl.float32)
            u = tl.load(x_ptr + K + rk).to(tl.float32)
            x = (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16).to(tl.float32)
        else:
            x = tl.load(x_ptr + rk).to(tl.float32)
        w = tl.load(w_ptr + rk[:, None] * N + rn[None, :]).to(tl.float32)
        acc += x[:, None] * w
    tl.store(p_ptr + ps * N + rn, tl.sum(acc, axis=0))


@triton.jit
def _sum_splits(p_ptr, y_ptr, N, S: tl.constexpr, BN: tl.constexpr):
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros([BN], tl.float32)
    for s in range(S):
        acc += tl.load(p_ptr + s * N + rn)
    tl.store(y_ptr + rn, acc.to(tl.bfloat16))


@triton.jit
def _gemv_chained(prev_ptr, w_ptr, p_ptr, N, K: tl.constexpr, S_PREV: tl.constexpr, KS: tl.constexpr,
                  BN: tl.constexpr, PDL: tl.constexpr):
    """One link of a chain: the weight slice [KS, BN] is loaded first (it does not depend on the
    previous product), then the input (the previous link's split sums), once it is complete."""
    pn = tl.program_id(0)
    ps = tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()   # the next link may start loading its weights now
    rn = pn * BN + tl.arange(0, BN)
    rk = ps * KS + tl.arange(0, KS)
    w = tl.load(w_ptr + rk[:, None] * N + rn[None, :])
    if PDL:
        tl.extra.cuda.gdc_wait()                # the previous link has finished and its writes are visible
    x = tl.zeros([KS], tl.float32)
    for s in tl.static_range(S_PREV):
        x += tl.load(prev_ptr + s * K + rk)
    x = x.to(tl.bfloat16).to(tl.float32)
    tl.store(p_ptr + ps * N + rn, tl.sum(x[:, None] * w.to(tl.float32), axis=0))


@triton.jit
def _norm_link(p_ptr, x_ptr, K: tl.constexpr, S: tl.constexpr, PDL: tl.constexpr):
    """The small kernel between two products: sum the previous product's S splits (S = 0: read
    it as bf16), RMS-normalise, store bf16. One program, like the engine's norm at batch 1."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    rk = tl.arange(0, K)
    if S == 0:
        v = tl.load(p_ptr + rk).to(tl.float32)
    else:
        v = tl.zeros([K], tl.float32)
        for s in tl.static_range(S):
            v += tl.load(p_ptr + s * K + rk)
    v = v * tl.rsqrt(tl.sum(v * v, axis=0) / K + 1e-5)
    tl.store(x_ptr + rk, v.to(tl.bfloat16))


@triton.jit
def _gemv_after(x_ptr, w_ptr, p_ptr, N, KS: tl.constexpr, BN: tl.constexpr, PDL: tl.constexpr):
    """A product behind a small kernel: its weight slice is loaded before it waits for x."""
    pn = tl.program_id(0)
    ps = tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    rn = pn * BN + tl.arange(0, BN)
    rk = ps * KS + tl.arange(0, KS)
    w = tl.load(w_ptr + rk[:, None] * N + rn[None, :])
    if PDL:
        tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + rk).to(tl.float32)
    tl.store(p_ptr + ps * N + rn, tl.sum(x[:, None] * w.to(tl.float32), axis=0))


def sweep(shapes: list[str]) -> list[dict]:
    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    out = []
    for name, k, n in SHAPES:
        if name not in shapes:
            continue
        wbytes = n * k * 2
        copies = max(2, int(1.5e9 // wbytes))
        wts = [torch.randn(k, n, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
        silu = name == "down"
        xin = torch.randn(1, 2 * k if silu else k, device=dev, dtype=dt)
        x = (torch.nn.functional.silu(xin[:, :k]) * xin[:, k:]) if silu else xin
        ref = x.float() @ wts[0].float()
        t_cublas = graph_time(lambda i: x @ wts[i], copies)
        t_gate = graph_time(lambda i: (torch.nn.functional.silu(xin[:, :k]) * xin[:, k:]) @ wts[i], copies) \
            if silu else t_cublas
        print(f"{name}: cuBLAS {t_cublas * 1e6:.1f} us {wbytes / t_cublas / 1e9:.0f} GB/s"
              + (f" (with the gate's kernel {t_gate * 1e6:.1f} us)" if silu else ""), flush=True)
        out.append(dict(shape=name, impl="cublas", us=t_cublas * 1e6, us_with_gate=t_gate * 1e6,
                        gb_s=wbytes / t_cublas / 1e9))
        best = None
        for bn, bk, s, warps, stages in itertools.product((128, 256), (16, 32, 64), (4, 8, 16), (4, 8), (1, 3)):
            ks = k // s
            progs = (n // bn) * s
            if ks % bk or n % bn or (bk * bn) // (32 * warps) > 128 or not 132 <= progs <= 132 * 16:
                continue
            parts = torch.empty(s, n, device=dev, dtype=torch.float32)

            def run(i, bn=bn, bk=bk, s=s, warps=warps, stages=stages, parts=parts, ks=ks):
                _gemv_split[(n // bn, s)](xin, wts[i], parts, n, K=k, KS=ks, BN=bn, BK=bk, SILU=silu,
                                          num_warps=warps, num_stages=stages)
            run(0)
            torch.cuda.synchronize()
            # against float32 of the bf16 input (for down: of torch's gate, rounded twice, not once)
            err = (parts.sum(0) - ref[0]).abs().max().item() / ref.abs().max().item()
            t = graph_time(run, copies)
            row = dict(shape=name, impl="triton", bn=bn, bk=bk, split=s, warps=warps, stages=stages,
                       us=t * 1e6, gb_s=wbytes / t / 1e9, rel_err=err)
            out.append(row)
            best = row if best is None or row["us"] < best["us"] else best
            print(f"  {bn:3},{bk:2},{s:2},{warps},{stages}: {t * 1e6:7.1f} us {wbytes / t / 1e9:5.0f} GB/s "
                  f"rel.err {err:.1e}", flush=True)
        s = best["split"]
        parts = torch.empty(s, n, device=dev, dtype=torch.float32)
        y = torch.empty(1, n, device=dev, dtype=dt)
        t_sum = graph_time(lambda i: _sum_splits[(n // 256,)](parts, y, n, S=s, BN=256), copies)
        print(f"  best {best['bn']},{best['bk']},{s},{best['warps']},{best['stages']}: {best['us']:.1f} us; "
              f"summing its {s} splits alone {t_sum * 1e6:.1f} us", flush=True)
        out.append(dict(shape=name, impl="sum_splits", us=t_sum * 1e6, split=s))
        wts = None
        torch.cuda.empty_cache()
    return out


def chain() -> list[dict]:
    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    k = n = 4096
    ws = [torch.randn(k, n, device=dev, dtype=dt) * (1.0 / 64) for _ in range(CHAIN)]
    x0 = torch.randn(1, k, device=dev, dtype=dt)

    def per_link(fn, reps=20):
        graph_s = graph_time(lambda _i: fn(), 1, reps)
        return graph_s / CHAIN

    def cublas():
        x = x0
        for w in ws:
            x = x @ w
        return x
    out = [dict(chain="cublas", us=per_link(cublas) * 1e6)]
    print(f"chain cuBLAS: {out[0]['us']:.2f} us a product", flush=True)
    ref = cublas().float()[0]
    for s, bn, warps in ((16, 128, 8), (32, 128, 4)):
        for pdl in (False, True):
            bufs = [torch.zeros(s, k, device=dev, dtype=torch.float32) for _ in range(2)]

            def links(s=s, bn=bn, warps=warps, pdl=pdl, bufs=bufs):
                bufs[0].zero_()
                bufs[0][0].copy_(x0[0].float())
                for i, w in enumerate(ws):
                    _gemv_chained[(n // bn, s)](bufs[i % 2], w, bufs[(i + 1) % 2], n, K=k, S_PREV=s, KS=k // s,
                                                BN=bn, PDL=pdl, num_warps=warps, launch_pdl=pdl)
            links()
            torch.cuda.synchronize()
            # 64 roundings to bf16 apart from cuBLAS's: a check that the chain computed, not a tolerance
            err = ((bufs[CHAIN % 2].sum(0) - ref).abs().max() / ref.abs().max()).item()
            us = per_link(links) * 1e6
            out.append(dict(chain="triton", split=s, bn=bn, warps=warps, pdl=pdl, us=us, rel_err=err))
            print(f"chain triton split={s} bn={bn} warps={warps} pdl={pdl}: {us:.2f} us a product "
                  f"(rel. difference {err:.1e})", flush=True)
    return out


def layers() -> list[dict]:
    """64 links of (small norm kernel -> o-shaped product): how much of the small kernel a
    product launched with PDL hides by loading its weights while the small kernel runs."""
    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    k = n = 4096
    ws = [torch.randn(k, n, device=dev, dtype=dt) * (1.0 / 64) for _ in range(CHAIN)]
    x = torch.empty(k, device=dev, dtype=dt)
    y0 = torch.randn(k, device=dev, dtype=dt)
    out = []

    def per_link(fn):
        return graph_time(lambda _i: fn(), 1) / CHAIN * 1e6

    def small_only():
        for _ in ws:
            _norm_link[(1,)](y0, x, K=k, S=0, PDL=False, num_warps=8)

    def cublas():
        y = y0
        for w in ws:
            _norm_link[(1,)](y, x, K=k, S=0, PDL=False, num_warps=8)
            y = x[None, :] @ w
    out.append(dict(link="norm kernel alone", us=per_link(small_only)))
    out.append(dict(link="norm + cuBLAS", us=per_link(cublas)))
    for s, bn, warps in ((32, 128, 4), (16, 128, 8)):
        for pdl in (False, True):
            parts = torch.zeros(s, n, device=dev, dtype=torch.float32)
            parts[0].copy_(y0.float())

            def links(s=s, bn=bn, warps=warps, pdl=pdl, parts=parts):
                for w in ws:
                    _norm_link[(1,)](parts, x, K=k, S=s, PDL=pdl, num_warps=8, launch_pdl=pdl)
                    _gemv_after[(n // bn, s)](x, w, parts, n, KS=k // s, BN=bn, PDL=pdl, num_warps=warps,
                                              launch_pdl=pdl)
            out.append(dict(link=f"norm + Triton, {s} splits, {warps} warps, PDL {'on' if pdl else 'off'}",
                            us=per_link(links)))
    for r in out:
        print(f"{r['link']:48} {r['us']:6.2f} us a link", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.benchmarks.gemv")
    ap.add_argument("--chain", action="store_true", help="time chains of dependent products instead")
    ap.add_argument("--layers", action="store_true", help="time chains of (norm kernel, product) links instead")
    ap.add_argument("--shapes", default="qkv,o,down")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = chain() if args.chain else layers() if args.layers else sweep(args.shapes.split(","))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
