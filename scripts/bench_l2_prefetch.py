"""`python3 scripts/bench_l2_prefetch.py`: does reading the next projection's weight into L2
with the Hopper bulk prefetch, from a few programs on a side stream, speed up a batch-1 decode?

A batch-1 decode step streams the weights, and between the projections memory sits idle while
RoPE, the KV write, attention and the norms run. An earlier try read the o weight into L2 behind
attention with a load kernel over all SMs (engine commit 7244a77), and every variant was slower:
its thousands of programs took the SMs from the small kernels it meant to hide behind. The
`cp.async.bulk.prefetch.L2` instruction (sm_90) asks the tensor memory accelerator of the SM
that issues it to bring a byte range into L2 without returning data to the SM, so a handful of
one-warp programs can ask for tens of megabytes.

It times the o projection's product (1 x 4096 @ 4096 x 4096, bf16, over the engine's
column-major layout; in the decode profile cuBLAS runs it split over K, then a reduce) after L2
was flushed, against after the bulk prefetch of its weight at several sizes a lane, a spin of
about 100 us in between so that every prefetch has landed, the variants alternating. The
product over a weight already in L2 is the most a prefetch behind attention could give that
projection.

Needs an sm_90 GPU. Figures and the command that made them: docs/perf/engine.md. A script, not
one of engine/benchmarks: any commit under engine/ moves the engine's source date, and with it
the wheel's bytes that the gpu-h200 evidence binds."""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton
import triton.language as tl

CHUNKS_PER_PROGRAM = 32        # one warp a program, one bulk prefetch a lane


@triton.jit
def _l2_prefetch_kernel(src, sink, nbytes, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    left = nbytes - idx * CHUNK
    size = tl.minimum(tl.maximum(left, 0), CHUNK).to(tl.int32) // 16 * 16   # the size must be a multiple of 16
    ptrs = src.to(tl.pointer_type(tl.int8)) + tl.where(size > 0, idx * CHUNK, 0)
    # The prefetch returns nothing; the asm's zero result, summed and stored, keeps the op in.
    r = tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptrs, size], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(sink + pid, tl.sum(r, axis=0))


def l2_prefetch(t: torch.Tensor, nbytes: int | None, chunk: int, sink: torch.Tensor) -> None:
    """Ask L2 for the first nbytes (all by default) of t's storage, chunk bytes a lane."""
    total = t.numel() * t.element_size()
    n = total if nbytes is None else min(int(nbytes), total)
    grid = triton.cdiv(triton.cdiv(n, chunk), CHUNKS_PER_PROGRAM)
    # t's data_ptr is its storage's first byte in both projection layouts (a transposed view
    # starts where the contiguous tensor does); the kernel counts in bytes from there.
    _l2_prefetch_kernel[(grid,)](t, sink, n, CHUNK=chunk, BLOCK=CHUNKS_PER_PROGRAM, num_warps=1)


def _flush_l2(buf: torch.Tensor) -> None:
    buf.zero_()


def gemv_part(dev, chunks: list[int], reps: int) -> list[dict]:
    """µs of the o product cold (L2 flushed), and after its weight was prefetched (spin between)."""
    k = n = 4096
    w = torch.randn(k, n, dtype=torch.bfloat16, device=dev)
    x = torch.randn(1, k, dtype=torch.bfloat16, device=dev)
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    sink = torch.zeros(4096, dtype=torch.int32, device=dev)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one(chunk: int | None) -> float:
        _flush_l2(flush)
        if chunk is not None:
            l2_prefetch(w, None, chunk, sink)
        torch.cuda._sleep(200_000)            # ~100 us at ~2 GHz: every prefetch has landed
        e0.record()
        x @ w
        e1.record()
        torch.cuda.synchronize()
        return e0.elapsed_time(e1) * 1e3

    rows = []
    variants = [None] + chunks
    for v in variants:
        one(v)
    times = {v: [] for v in variants}
    for _ in range(reps):
        for v in variants:
            times[v].append(one(v))
    for v in variants:
        rows.append(dict(part="gemv", prefetch="none" if v is None else f"chunk {v // 1024} KB",
                         us_median=statistics.median(times[v]), us_min=min(times[v])))
    return rows


def chunk_sizes(text: str) -> list[int]:
    """--chunks-kb: positive whole KB (so multiples of the 16 bytes a bulk prefetch moves)."""
    try:
        kb = [int(x) for x in text.split(",")]
    except ValueError:
        kb = []
    if not kb or any(x < 1 for x in kb):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive whole KB, got {text!r}")
    return [x * 1024 for x in kb]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 scripts/bench_l2_prefetch.py")
    ap.add_argument("--chunks-kb", type=chunk_sizes, default="16,64,256,1024",
                    help="bulk prefetch sizes a lane, KB, comma-separated")
    ap.add_argument("--reps", type=int, default=20, help="rounds, each timing every variant once")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        raise SystemExit("bench_l2_prefetch needs an sm_90 GPU (cp.async.bulk.prefetch.L2)")
    dev = torch.device("cuda")
    rows = gemv_part(dev, args.chunks_kb, args.reps)
    for r in rows:
        print(f"gemv o, prefetch {r['prefetch']}: median {r['us_median']:.1f} us, min {r['us_min']:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                           rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
