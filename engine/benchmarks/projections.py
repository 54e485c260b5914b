"""`python -m engine.benchmarks.projections`: the decode step's projections and greedy argmax on the
8B config's shapes, each way torch can call them, timed side by side in one run.

Projections: F.linear(x, W) (W [N, K], the layout checkpoints use) against x @ Wt (Wt = W.T
made contiguous, [K, N]), at 1 and 8 rows. Each timing is one CUDA graph running the op over
enough weight copies to be several times the L2 (weights come from memory, as in a decode
step), replayed; time per op = graph time / copies. Argmax: torch.argmax over [B, vocab]
against the two-stage engine.runtime.sampling.argmax_rows."""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from engine.runtime.sampling import argmax_rows

SHAPES = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336),
          ("lm_head", 128256, 4096)]


def graph_time(fn, copies: int, reps: int = 20) -> float:
    """Seconds per call: fn(i) for i in range(copies) captured once, replayed reps times (median)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(copies):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.benchmarks.projections")
    ap.add_argument("--rows", default="1,8")
    ap.add_argument("--min-bytes", type=float, default=1e9, help="weight bytes one graph replay streams")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    dev, dt = torch.device("cuda"), torch.bfloat16
    torch.manual_seed(0)
    rows = []
    for name, n, k in SHAPES:
        wbytes = n * k * 2
        copies = max(2, int(args.min_bytes // wbytes))
        ws = [torch.randn(n, k, device=dev, dtype=dt) * 0.02 for _ in range(copies)]
        wts = [w.t().contiguous() for w in ws]
        for m in (int(r) for r in args.rows.split(",")):
            x = torch.randn(m, k, device=dev, dtype=dt)
            t_lin = graph_time(lambda i: F.linear(x, ws[i]), copies)
            t_mm = graph_time(lambda i: x @ wts[i], copies)
            row = dict(shape=name, n=n, k=k, rows=m, linear_us=t_lin * 1e6, matmul_t_us=t_mm * 1e6,
                       linear_gb_s=wbytes / t_lin / 1e9, matmul_t_gb_s=wbytes / t_mm / 1e9)
            rows.append(row)
            print(f"{name:8} m={m:<2} F.linear {row['linear_us']:7.1f} us {row['linear_gb_s']:6.0f} GB/s   "
                  f"x @ Wt {row['matmul_t_us']:7.1f} us {row['matmul_t_gb_s']:6.0f} GB/s", flush=True)
        ws = wts = None
        torch.cuda.empty_cache()
    for b in (int(r) for r in args.rows.split(",")):
        logits = [torch.randn(b, 128256, device=dev) for _ in range(16)]
        t_one = graph_time(lambda i: torch.argmax(logits[i], dim=-1), 16)
        t_two = graph_time(lambda i: argmax_rows(logits[i]), 16)
        same = all(torch.equal(torch.argmax(x, dim=-1), argmax_rows(x)) for x in logits)
        rows.append(dict(shape="argmax", rows=b, argmax_us=t_one * 1e6, argmax_rows_us=t_two * 1e6, equal=same))
        print(f"argmax   b={b:<2} torch.argmax {t_one * 1e6:6.1f} us   argmax_rows {t_two * 1e6:6.1f} us   "
              f"equal {same}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(dev), torch=torch.__version__, rows=rows), f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
