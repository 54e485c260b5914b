"""`python -m engine.kernels.bench_gemv`: the decode GEMV kernels against cuBLAS on the 8B
config's projection shapes, over a grid of launch configs; prints GB/s and the best config.

Each measurement is one CUDA graph that runs the op over enough copies of the weight to be
several times the L2 (so weights come from memory, as in a decode step), replayed; time per
op = graph time / copies. cuBLAS rows time F.linear alone (no norm): the ceiling to beat."""
from __future__ import annotations

import argparse
import itertools
import json
import time

import torch
import torch.nn.functional as F

from engine.kernels.triton_gemv import GemvConfig, norm_linear_triton, silu_linear_triton

# (name, kind, N, K) of Llama-3.1-8B's decode projections (lm_head's N is the vocabulary).
SHAPES = [("qkv", "norm", 6144, 4096), ("o", "plain", 4096, 4096), ("gate_up", "norm", 28672, 4096),
          ("down", "silu", 4096, 14336), ("lm_head", "norm", 128256, 4096)]


def _graph_time(fn, copies: int, reps: int = 10) -> float:
    """Seconds per op: fn(i) for i in range(copies) captured once, replayed reps times."""
    for i in range(copies):
        fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(copies):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[reps // 2] / copies


def grid() -> list[GemvConfig]:
    out = [GemvConfig(bn, bk, 4, st) for bn, bk, st in itertools.product((16, 32, 64), (128, 256, 512), (3, 5))]
    return out + [GemvConfig(64, 256, 8, 3), GemvConfig(128, 128, 8, 3), GemvConfig(32, 512, 8, 4)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.kernels.bench_gemv")
    ap.add_argument("--rows", default="1,8")
    ap.add_argument("--min-bytes", type=float, default=512e6, help="weight bytes a graph streams per replay")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    results = []
    for name, kind, n, k in SHAPES:
        wbytes = n * k * 2
        copies = max(2, int(args.min_bytes // wbytes))
        ws = [torch.randn(n, k, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
        nw = torch.ones(k, device=dev, dtype=dt)
        for m in (int(r) for r in args.rows.split(",")):
            x = torch.randn(m, 2 * k if kind == "silu" else k, device=dev, dtype=dt)
            res = torch.randn(m, k, device=dev, dtype=dt)
            xin = x[:, :k].contiguous() if kind == "silu" else x
            t = _graph_time(lambda i: F.linear(xin, ws[i]), copies)
            row = dict(shape=name, kind=kind, n=n, k=k, m=m, cublas_gb_s=wbytes / t / 1e9, cublas_us=t * 1e6)
            best = None
            if kind != "plain":
                for cfg in grid():
                    if kind == "norm":
                        fn = lambda i, c=cfg: norm_linear_triton(x, res, nw, 1e-5, ws[i], None, config=c)  # noqa: E731
                    else:
                        fn = lambda i, c=cfg: silu_linear_triton(x, ws[i], config=c)  # noqa: E731
                    try:
                        tc = _graph_time(fn, copies)
                    except Exception as e:  # noqa: BLE001 - a config that does not compile is skipped
                        print(f"  {name} m={m} {cfg}: {type(e).__name__}")
                        continue
                    if best is None or tc < best[0]:
                        best = (tc, cfg)
                row.update(triton_gb_s=wbytes / best[0] / 1e9, triton_us=best[0] * 1e6, best=best[1].__dict__)
            results.append(row)
            extra = f"  triton {row['triton_gb_s']:7.0f} GB/s {row['triton_us']:8.1f} us  best {row['best']}" \
                if best else ""
            print(f"{name:8} m={m:<2} cublas {row['cublas_gb_s']:7.0f} GB/s {row['cublas_us']:8.1f} us{extra}",
                  flush=True)
        del ws
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(dev), torch=torch.__version__, rows=results), f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
