"""Decode-attention bandwidth against a device-to-device copy, measured side by side in one run.

    python -m engine.benchmarks.kernels [--sweep] [--json PATH]

8B-class shape: 32 q heads, 8 kv heads, head_dim 128, block 16; bf16 and int8 KV; contexts
1K and 32K; batch 1 and 8. Bytes counted are the fewest the op must move: every cached
K and V element (and int8 scale) of every sequence read once, q read and out written once.
Each timing is the median of CUDA-graph replays that rotate over enough input sets (disjoint
random blocks of one pool) to keep the 60 MB L2 from serving repeats. Needs CUDA.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch
import triton
import triton.testing

from engine.kernels.cache_layout import empty_cache
from engine.kernels.reference import paged_decode_attention_ref
from engine.kernels.triton_decode import DEFAULT_CONFIGS, DecodeConfig, paged_decode_attention_triton

HQ, HKV, D, PAGE = 32, 8, 128, 16
ROTATE_BYTES = 512 * 2**20


def copy_bandwidth(nbytes: int = 2 * 2**30) -> float:
    """GB/s of a device-to-device copy, counting bytes read plus bytes written."""
    src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    return 2 * nbytes / (ms * 1e-3) / 1e9


def make_case(batch: int, ctx: int, int8: bool, gen: torch.Generator):
    """Input sets sharing one pool of blocks, each set on its own random blocks."""
    nblk = ctx // PAGE
    per_token = HKV * D * 2 * (1 if int8 else 2) + (HKV * 4 * 2 if int8 else 0)
    call_bytes = batch * ctx * per_token + 2 * batch * HQ * D * 2
    sets = max(1, min(64, math.ceil(ROTATE_BYTES / call_bytes)))
    num_blocks = sets * batch * nblk
    shape = (num_blocks, PAGE, HKV, D)
    if int8:
        kc = torch.randint(-127, 128, shape, dtype=torch.int8, device="cuda")
        vc = empty_cache(shape, torch.int8, "cuda", v=True).random_(-127, 128)   # the pool's layout
        ks = torch.rand(shape[:3], device="cuda") / 64
        vs = torch.rand(shape[:3], device="cuda") / 64
    else:
        kc = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
        vc = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
        ks = vs = None
    perm = torch.randperm(num_blocks, generator=gen).int().cuda().view(sets, batch, nblk)
    lens = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
    out = []
    for i in range(sets):
        q = torch.randn(batch, HQ, D, dtype=torch.bfloat16, device="cuda")
        out.append((q, kc, vc, ks, vs, perm[i].contiguous(), lens, 1 / math.sqrt(D)))
    return out, call_bytes


def time_graph(arg_sets, cfg: DecodeConfig) -> float:
    """Median ms per decode call, from graph replays over the rotating input sets."""
    def run_all():
        for a in arg_sets:
            paged_decode_attention_triton(*a, config=cfg)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run_all()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run_all()
    ms = triton.testing.do_bench(g.replay, warmup=25, rep=200, return_mode="median")
    del g
    return ms / len(arg_sets)


def rel_err(arg_sets, cfg) -> float:
    a = arg_sets[0]
    got = paged_decode_attention_triton(*a, config=cfg).double()
    ref = paged_decode_attention_ref(*a).double()
    return float((got - ref).norm() / ref.norm())


SWEEP = [DecodeConfig(bn, w, st, sp) for sp in (128, 256, 512) for bn in (64, 128)
         for w in (4, 8) for st in (2, 3)]


def sweep(int8: bool, gen, report) -> DecodeConfig:
    """Time every SWEEP config at 32K and 1K, batch 1; pick the best summed relative time."""
    times = {}
    for ctx in (32768, 1024):
        sets, nbytes = make_case(1, ctx, int8, gen)
        for cfg in SWEEP:
            ms = time_graph(sets, cfg)
            times.setdefault(cfg, []).append(ms)
            report["sweep"].append({"int8": int8, "ctx": ctx, **cfg.__dict__, "us": ms * 1e3,
                                    "GBps": nbytes / (ms * 1e-3) / 1e9})
        del sets
        torch.cuda.empty_cache()
    best = [min(t[i] for t in times.values()) for i in range(2)]
    score = {cfg: sum(t[i] / best[i] for i in range(2)) for cfg, t in times.items()}
    for cfg, t in sorted(times.items(), key=lambda kv: score[kv[0]]):
        print(f"sweep {'int8' if int8 else 'bf16'} n{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages} "
              f"split{cfg.split_tokens}: 32K {t[0] * 1e3:7.1f} us  1K {t[1] * 1e3:6.1f} us  score {score[cfg]:.3f}")
    return min(score, key=score.get)


def parse_config(text: str) -> DecodeConfig:
    """'block_n,warps,stages,split[,e][,n][,cN]' (e: early V load; n: 32-bit KV addresses while
    the caches fit them; cN: stage 2 merges N splits a step) -> DecodeConfig."""
    parts = text.split(",")
    bn, w, st, sp = (int(x) for x in parts[:4])
    flags = parts[4:]
    chunks = [int(f[1:]) for f in flags if f.startswith("c")]
    if any(f not in ("e", "n") and not f.startswith("c") for f in flags) or len(chunks) > 1:
        raise ValueError(f"config {text!r}: expected 'block_n,warps,stages,split[,e][,n][,cN]'")
    return DecodeConfig(bn, w, st, sp, early_v="e" in flags, narrow_offsets="n" in flags,
                        **({"merge_chunk": chunks[0]} if chunks else {}))


def config_text(cfg: DecodeConfig) -> str:
    return (f"{cfg.block_n},{cfg.num_warps},{cfg.num_stages},{cfg.split_tokens}" + (",e" if cfg.early_v else "")
            + (",n" if cfg.narrow_offsets else "") + f",c{cfg.merge_chunk}")


def pick_int8(candidates, gen, report) -> DecodeConfig:
    """Time int8 candidates against the bf16 default at 32K (batch 1 and 8) and 1K (batch 1);
    pick the lowest sum of int8/bf16 time ratios at 32K, plus a quarter of the 1K ratio."""
    cases = [(32768, 1), (32768, 8), (1024, 1)]
    base = {}
    for ctx, batch in cases:
        sets, _ = make_case(batch, ctx, False, gen)
        base[(ctx, batch)] = time_graph(sets, DEFAULT_CONFIGS[False])
        del sets
    torch.cuda.empty_cache()
    scores = {}
    for cfg in candidates:
        t = {}
        for ctx, batch in cases:
            sets, _ = make_case(batch, ctx, True, gen)
            t[(ctx, batch)] = time_graph(sets, cfg)
            del sets
        torch.cuda.empty_cache()
        r = {k: t[k] / base[k] for k in cases}
        scores[cfg] = r[(32768, 1)] + r[(32768, 8)] + 0.25 * r[(1024, 1)]
        report["int8_candidates"].append({"config": config_text(cfg), "us": {f"{c}x{b}": t[(c, b)] * 1e3 for c, b in cases},
                                          "bf16_us": {f"{c}x{b}": base[(c, b)] * 1e3 for c, b in cases},
                                          "score": scores[cfg]})
        print(f"int8 {config_text(cfg):14} 32Kx1 {t[(32768, 1)] * 1e3:6.1f} us (bf16 {base[(32768, 1)] * 1e3:6.1f})"
              f"  32Kx8 {t[(32768, 8)] * 1e3:6.1f} (bf16 {base[(32768, 8)] * 1e3:6.1f})"
              f"  1Kx1 {t[(1024, 1)] * 1e3:5.1f} (bf16 {base[(1024, 1)] * 1e3:5.1f})  score {scores[cfg]:.3f}")
    return min(scores, key=scores.get)


def time_candidates(int8: bool, candidates, gen, report) -> None:
    """Time launch configs side by side at 1K and 32K, batch 1 and 8 (prints; picks nothing)."""
    cases = [(1024, 1), (1024, 8), (32768, 1), (32768, 8)]
    for ctx, batch in cases:
        sets, nbytes = make_case(batch, ctx, int8, gen)
        line = []
        for cfg in candidates:
            us = time_graph(sets, cfg) * 1e3
            report["candidates"].append({"int8": int8, "ctx": ctx, "batch": batch, "config": config_text(cfg), "us": us})
            line.append(f"{config_text(cfg)}: {us:6.1f}")
        print(f"{'int8' if int8 else 'bf16'} {ctx:>5}x{batch}  " + "  ".join(line), flush=True)
        del sets
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="pick launch configs by timing SWEEP first")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--int8-candidates", help="'bn,w,st,split[,e][,n][,cN];...': time these int8 configs against "
                    "the bf16 default and use the best for the int8 rows")
    ap.add_argument("--bf16-candidates", help="'bn,w,st,split[,e][,n][,cN];...': time these bf16 configs side by side")
    ap.add_argument("--pick", help="write the picked int8 config ('bn,w,st,split[,e][,n],cN') to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_kernels needs CUDA", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    copy_gbs = copy_bandwidth()
    report = {"gpu": props.name, "torch": torch.__version__, "triton": triton.__version__,
              "copy_GBps": copy_gbs, "sweep": [], "cases": [], "int8_candidates": [], "candidates": []}
    print(f"{props.name}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s (read + write)")
    configs = dict(DEFAULT_CONFIGS)
    if args.sweep:
        for int8 in (False, True):
            configs[int8] = sweep(int8, gen, report)
    if args.bf16_candidates:
        time_candidates(False, [parse_config(c) for c in args.bf16_candidates.split(";")], gen, report)
    if args.int8_candidates:
        configs[True] = pick_int8([parse_config(c) for c in args.int8_candidates.split(";")], gen, report)
        print(f"picked int8 config {config_text(configs[True])}")
        if args.pick:
            with open(args.pick, "w") as f:
                f.write(config_text(configs[True]) + "\n")
    rows = []
    for int8 in (False, True):
        for ctx in (1024, 32768):
            for batch in (1, 8):
                sets, nbytes = make_case(batch, ctx, int8, gen)
                cfg = configs[int8]
                ms = time_graph(sets, cfg)
                err = rel_err(sets, cfg)
                gbs = nbytes / (ms * 1e-3) / 1e9
                row = {"kv": "int8" if int8 else "bf16", "ctx": ctx, "batch": batch, "us": ms * 1e3,
                       "MB": nbytes / 1e6, "GBps": gbs, "of_copy": gbs / copy_gbs, "rel_err": err,
                       "config": cfg.__dict__, "input_sets": len(sets)}
                rows.append(row)
                del sets
                torch.cuda.empty_cache()
    report["cases"] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    print(f"\n{'kv':5} {'ctx':>6} {'batch':>5} {'MB':>8} {'us':>8} {'GB/s':>7} {'of copy':>8} {'rel err':>9}  config")
    for r in rows:
        c = r["config"]
        print(f"{r['kv']:5} {r['ctx']:6d} {r['batch']:5d} {r['MB']:8.1f} {r['us']:8.1f} {r['GBps']:7.0f} "
              f"{r['of_copy']:8.2f} {r['rel_err']:9.1e}  n{c['block_n']} w{c['num_warps']} "
              f"s{c['num_stages']} split{c['split_tokens']}{' early_v' if c.get('early_v') else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
