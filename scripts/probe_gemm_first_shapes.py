"""Host time of the first bf16 product at a new row count against the same product again: the
8B config's projection shapes on CUDA. cuBLAS chooses its kernel per shape; this shows what a
shape's first call costs the host, apart from the engine.

    python3 scripts/probe_gemm_first_shapes.py [--rows 17,26,70,76,276,1041]

Needs CUDA.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

# (in, out): fused q/k/v, o, fused gate/up, down, as the engine's 8B benchmark config stores them.
SHAPES = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]


def timed(x, w) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    F.linear(x, w)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="17,26,70,76,276,1041,1100,1300")
    args = ap.parse_args()
    dev = torch.device("cuda")
    ws = [torch.randn(o, i, dtype=torch.bfloat16, device=dev) / 64 for i, o in SHAPES]
    for m in (1024, 64, 1):    # shapes a warm-up would have run
        for (i, _), w in zip(SHAPES, ws):
            for _ in range(2):
                timed(torch.randn(m, i, dtype=torch.bfloat16, device=dev), w)
    for m in [int(r) for r in args.rows.split(",")]:
        xs = [torch.randn(m, i, dtype=torch.bfloat16, device=dev) for i, _ in SHAPES]
        first = [timed(x, w) for x, w in zip(xs, ws)]
        again = [timed(x, w) for x, w in zip(xs, ws)]
        print(f"rows {m:5d}: first " + " ".join(f"{t:6.3f}" for t in first) + "  again "
              + " ".join(f"{t:6.3f}" for t in again) + f"  ms (extra {sum(first) - sum(again):.3f} ms over "
              f"{len(SHAPES)} products)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
