"""The host's share of an eager prefill pass on CUDA, and what the compiled elementwise ops cost
in it: one pass of the 8B config's shapes at several row counts, its norms and SwiGLU gate
through the compiled ops (the engine's default on CUDA) against the eager ones, alternating in
one process over the same weights, KV pool and tokens.

Per pass it prints the host's time to issue the pass (ModelRunner.run_window returns before the
GPU finishes; no synchronisation inside) and the GPU's span from its first kernel to its last
(CUDA events); medians over --passes passes a round, rounds alternating which variant goes
first. Before the passes, each op alone at those row counts (host and wall time a call); after
them, one short pass of each variant under cProfile. RoPE and the KV write stay one compiled
Triton kernel in both variants.

    python3 scripts/bench_prefill_host.py [--rows 16,64,256,1040,2048] [--rounds 3] [--passes 5] [--layers 32]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.benchmarks.decode import LLAMA_8B, hf_model  # noqa: E402
from engine.benchmarks.harness import BenchLLM  # noqa: E402
from engine.model import fused  # noqa: E402
from engine.model.config import ModelConfig  # noqa: E402
from engine.model.weights import build_model  # noqa: E402

OPS = ("rms_norm", "add_rms_norm", "silu_mul")


@dataclass
class _Scratch:
    """What ModelRunner.run_window reads of a sequence: its blocks and its cached length."""
    blocks: list[int]
    kv_len: int = 0


def use(variant: dict) -> None:
    for name, fn in variant.items():
        setattr(fused, name, fn)


def one_pass(llm, seq, ids) -> tuple[float, float]:
    """(host ms to issue, GPU ms first kernel to last) of one prefill pass from position 0."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    seq.kv_len = 0
    e0.record()
    t0 = time.perf_counter()
    llm.runner.run_window(seq, ids, all_logits=False)
    host = (time.perf_counter() - t0) * 1e3
    e1.record()
    torch.cuda.synchronize()
    return host, e0.elapsed_time(e1)


def op_costs(variants: dict, rows: list[int], hidden: int, inter: int, calls: int = 200) -> None:
    """Each op alone, `calls` calls queued back to back: host us a call to queue them, and wall us
    a call until the GPU is done (the larger of the host's and the GPU's time)."""
    dev = torch.device("cuda")
    w = torch.ones(hidden, device=dev, dtype=torch.bfloat16)
    print(f"{'op':>13} {'rows':>6} | " + " | ".join(f"{v:>8} host / wall us" for v in variants))
    for n in rows:
        x = torch.randn(n, hidden, device=dev, dtype=torch.bfloat16)
        gu = torch.randn(n, 2 * inter, device=dev, dtype=torch.bfloat16)
        args = {"rms_norm": (x, w, 1e-5), "add_rms_norm": (x, x, w, 1e-5), "silu_mul": (gu, inter)}
        for name in OPS:
            cells = []
            for v in variants.values():
                fn = v[name]
                for _ in range(5):
                    fn(*args[name])
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn(*args[name])
                host = (time.perf_counter() - t0) / calls * 1e6
                torch.cuda.synchronize()
                wall = (time.perf_counter() - t0) / calls * 1e6
                cells.append(f"{host:8.1f} / {wall:8.1f}      ")
            print(f"{name:>13} {n:6d} | " + " | ".join(cells), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="16,64,256,1040,2048")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-cudnn-sdp", action="store_true",
                    help="turn torch's cuDNN attention backend off, process-wide, before anything runs")
    args = ap.parse_args()
    if args.no_cudnn_sdp:
        torch.backends.cuda.enable_cudnn_sdp(False)
    dev = torch.device("cuda")
    rows = [int(r) for r in args.rows.split(",")]
    spec = {**LLAMA_8B, "num_hidden_layers": args.layers}
    cfg = ModelConfig.from_dict(spec, where="bench config")
    max_len = max(rows) + 64
    model = build_model(cfg, dict(hf_model(spec, dev).state_dict()), torch.bfloat16, dev, max_len, "hf model")
    llm = BenchLLM(cfg, model, kv_dtype="bf16", device=dev, kv_capacity_tokens=max_len + 64, max_concurrency=1,
                   max_model_len=max_len, prefill_chunk=max(rows))
    if not fused.is_compiled():
        sys.exit("the compiled elementwise ops did not build here")
    # An engine that picks the eager ops for short prefill passes itself (fused.EAGER_PREFILL_ROWS)
    # would run both variants alike there: that choice is off here, so each runs as named.
    fused.EAGER_PREFILL_ROWS = 0
    variants = {"compiled": {n: getattr(fused, n) for n in OPS}, "eager": {n: fused._EAGER[n] for n in OPS}}
    op_costs(variants, rows, cfg.hidden_size, cfg.intermediate_size)
    g = torch.Generator().manual_seed(0)
    tokens = {n: torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist() for n in rows}
    res = {(v, n): {"host": [], "gpu": []} for v in variants for n in rows}
    try:
        with llm.paused():
            seq = _Scratch(llm.blocks.allocate(llm.blocks.blocks_needed(max(rows))))
            for v in variants:                           # each variant's first passes, untimed
                use(variants[v])
                for n in rows:
                    one_pass(llm, seq, tokens[n])
            for r in range(args.rounds):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for v in order:
                    use(variants[v])
                    for n in rows:
                        for _ in range(args.passes):
                            host, gpu = one_pass(llm, seq, tokens[n])
                            res[(v, n)]["host"].append(host)
                            res[(v, n)]["gpu"].append(gpu)
            print(f"{args.layers} layers, 8B shapes, bf16; medians of {args.rounds} x {args.passes} passes (ms)")
            print(f"{'rows':>6} | {'compiled host':>13} {'GPU':>7} | {'eager host':>10} {'GPU':>7} | host c/e")
            for n in rows:
                c, e = res[("compiled", n)], res[("eager", n)]
                ch, cg = statistics.median(c["host"]), statistics.median(c["gpu"])
                eh, eg = statistics.median(e["host"]), statistics.median(e["gpu"])
                print(f"{n:6d} | {ch:13.1f} {cg:7.1f} | {eh:10.1f} {eg:7.1f} | {ch / eh:.2f}", flush=True)
            short = min(rows)
            for v in variants:
                use(variants[v])
                prof = cProfile.Profile()
                seq.kv_len = 0
                prof.runcall(llm.runner.run_window, seq, tokens[short], False)
                torch.cuda.synchronize()
                print(f"--- cProfile, one {short}-row pass, {v} ops, by cumulative time")
                pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)
                print("--- the same, by own time")
                pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            use(variants["compiled"])
            llm.blocks.reset()
    finally:
        llm.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
