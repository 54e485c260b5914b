"""First-request latency by prompt length on CUDA: a fresh engine serves prompts whose last
prefill chunk has a length it has not served yet, then the same lengths again. Each request's
time to first token is printed with what compiled during it: Triton JIT compiles (the engine's
own kernels, by name and argument specialisation) and Dynamo's compiled graphs; and the segments
the CUDA caching allocator had to cudaMalloc (a longer prompt's tensors may not fit the cached
ones). Last, the attention kernels one prefill ran (which backend SDPA chose); --no-cudnn-sdp
turns torch's cuDNN attention backend off first, to compare.

    python3 scripts/probe_first_shapes.py [--layers 4] [--chunk 1024] [--lengths 1024,1041,1041,...] [--no-cudnn-sdp]
        [--profile N]

The 8B config's shapes with fewer layers (compiles do not depend on the layer count). Needs CUDA.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.benchmarks.decode import LLAMA_8B, hf_model  # noqa: E402
from engine.benchmarks.harness import BenchLLM  # noqa: E402
from engine.model.config import ModelConfig  # noqa: E402
from engine.model.weights import build_model  # noqa: E402
from engine.runtime.sampling import SamplingParams  # noqa: E402


def profile_new_length(llm, cfg, n: int, g) -> None:
    """Host time per profiler event, summed over the first request of a new length and over its
    repeat; the events whose totals differ most are what the first time pays for. torch's
    profiler records aten operators on the calling thread only, and the scheduler's thread serves
    the request, so this names CUDA runtime calls (cuBLAS's own first-call cost shows apart in
    scripts/probe_gemm_first_shapes.py)."""
    from torch.profiler import ProfilerActivity, profile
    prompt = torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist()
    runs = []
    for label in ("first", "again"):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            next(iter(llm.submit(prompt, SamplingParams(max_new_tokens=2, ignore_eos=True)).stream()))
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        runs.append({e.key: (e.self_cpu_time_total / 1e3, e.count) for e in prof.key_averages()})
        print(f"profiled prompt {n} ({label}): {ms:.1f} ms under the profiler", flush=True)
    first, again = runs
    diff = sorted(((first[k][0] - again.get(k, (0.0, 0))[0], k) for k in first), reverse=True)[:15]
    for d, k in diff:
        print(f"  {k[:70]:70} first {first[k][0]:8.2f} ms x{first[k][1]:<5} again "
              f"{again.get(k, (0.0, 0))[0]:8.2f} ms   +{d:.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--lengths", default="1024,1041,1041,1050,1100,1041,1300,1300,64,70,70")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="last, profile a prompt of N tokens (a new length) and then the same again, and "
                         "print the ops whose host time differs most between the two")
    ap.add_argument("--no-cudnn-sdp", action="store_true",
                    help="turn torch's cuDNN attention backend off, process-wide, before anything runs")
    args = ap.parse_args()
    if args.no_cudnn_sdp:
        torch.backends.cuda.enable_cudnn_sdp(False)
    from torch._dynamo.utils import counters
    from triton import knobs
    compiled: list[str] = []

    def on_compile(*_a, **kw):
        compiled.append(str(kw.get("repr", "?")).split("(")[0])

    knobs.runtime.jit_post_compile_hook = on_compile
    dev = torch.device("cuda")
    spec = {**LLAMA_8B, "num_hidden_layers": args.layers}
    cfg = ModelConfig.from_dict(spec, where="probe config")
    lengths = [int(n) for n in args.lengths.split(",")]
    max_len = max(lengths) + 64
    model = build_model(cfg, dict(hf_model(spec, dev).state_dict()), torch.bfloat16, dev, max_len, "hf model")
    llm = BenchLLM(cfg, model, kv_dtype="bf16", device=dev, kv_capacity_tokens=max_len + 64, max_concurrency=1,
                   max_model_len=max_len, prefill_chunk=args.chunk)
    g = torch.Generator().manual_seed(0)
    print(f"engine warm-up at start: {llm.status().get('warmup')}", flush=True)
    try:
        for n in lengths:
            prompt = torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist()
            compiled.clear()
            graphs = counters["stats"]["unique_graphs"]
            torch.cuda.synchronize()
            segments = torch.cuda.memory_stats().get("segment.all.allocated", 0)
            t0 = time.perf_counter()
            next(iter(llm.submit(prompt, SamplingParams(max_new_tokens=2, ignore_eos=True)).stream()))
            ms = (time.perf_counter() - t0) * 1e3
            last = n % args.chunk or args.chunk
            print(f"prompt {n:5d} (last chunk {last:4d}): first token {ms:7.1f} ms; Triton compiles "
                  f"{len(compiled)} {sorted(set(compiled))}; Dynamo graphs +{counters['stats']['unique_graphs'] - graphs}; "
                  f"new allocator segments (cudaMalloc) "
                  f"{torch.cuda.memory_stats().get('segment.all.allocated', 0) - segments}",
                  flush=True)
        # Which attention kernels a prefill runs (SDPA picks its backend per call).
        from torch.profiler import ProfilerActivity, profile
        prompt = torch.randint(0, cfg.vocab_size, (lengths[0],), generator=g).tolist()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            next(iter(llm.submit(prompt, SamplingParams(max_new_tokens=2, ignore_eos=True)).stream()))
            torch.cuda.synchronize()
        names = {e.key for e in prof.key_averages()
                 if any(w in e.key.lower() for w in ("attn", "fmha", "flash", "cudnn", "sdpa"))}
        print(f"attention kernels of a {lengths[0]}-token prefill: {sorted(n[:90] for n in names)}", flush=True)
        if args.profile:
            profile_new_length(llm, cfg, args.profile, g)
    finally:
        llm.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
