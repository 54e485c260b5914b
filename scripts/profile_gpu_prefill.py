"""Where a prompt's prefill time goes on a CUDA GPU: the engine's time to first token for the 8B
config's prompt at several prefill chunk sizes (one engine each, alternating, the same prompts),
then, per chunk of one prefill, the host's time in the runner's call and the GPU's time from its
first kernel to its last (CUDA events), and one prefill under torch.profiler, its GPU kernels and
its host ops by time.

    python3 scripts/profile_gpu_prefill.py [--prompt 1040] [--chunks 256,1024] [--runs 5] [--top 20]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.benchmarks.decode import LLAMA_8B, hf_model  # noqa: E402
from engine.benchmarks.harness import BenchLLM  # noqa: E402
from engine.model.config import ModelConfig  # noqa: E402
from engine.model.weights import build_model  # noqa: E402
from engine.runtime.sampling import SamplingParams  # noqa: E402


def first_token_s(llm, prompt) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    next(iter(llm.submit(prompt, SamplingParams(max_new_tokens=2, ignore_eos=True)).stream()))
    return time.perf_counter() - t0


def chunk_trace(llm, prompt, python_profile: bool = False) -> list[tuple[int, float, float, float]]:
    """(start, host ms inside run_window, host ms from the previous chunk's return, GPU ms) per
    chunk of one prefill: the runner's run_window wrapped for one request. python_profile: the
    second chunk's call runs under cProfile (on the engine's thread), whose top entries print."""
    runner, rows = llm.runner, []
    inner, last = runner.run_window, [None]

    def traced(seq, tokens, all_logits):
        t0 = time.perf_counter()
        gap = (t0 - last[0]) * 1e3 if last[0] is not None else 0.0
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        if python_profile and len(rows) == 1:
            prof = cProfile.Profile()
            out = prof.runcall(inner, seq, tokens, all_logits)
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        else:
            out = inner(seq, tokens, all_logits)
        e1.record()
        last[0] = time.perf_counter()
        rows.append((seq.kv_len, (last[0] - t0) * 1e3, gap, e0, e1))
        return out

    runner.run_window = traced
    try:
        first_token_s(llm, prompt)
    finally:
        runner.run_window = inner
    torch.cuda.synchronize()
    return [(start, host, gap, e0.elapsed_time(e1)) for start, host, gap, e0, e1 in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", type=int, default=1040)
    ap.add_argument("--chunks", default="256,1024")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    cfg = ModelConfig.from_dict(LLAMA_8B, where="bench config 8b")
    max_len = args.prompt + 128
    model = build_model(cfg, dict(hf_model(LLAMA_8B, dev).state_dict()), torch.bfloat16, dev, max_len, "hf model")
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, cfg.vocab_size, (args.prompt,), generator=g).tolist() for _ in range(args.runs + 2)]
    chunks = [int(c) for c in args.chunks.split(",")]
    for chunk in chunks:
        llm = BenchLLM(cfg, model, kv_dtype="bf16", device=dev, kv_capacity_tokens=max_len + 64, max_concurrency=1,
                       max_model_len=max_len, prefill_chunk=chunk)
        try:
            for p in prompts[:2]:
                first_token_s(llm, p)                              # compile and warm up
            times = [first_token_s(llm, p) for p in prompts[2:]]
            print(f"prefill chunk {chunk}: first token {statistics.median(times) * 1e3:.1f} ms "
                  f"(runs {[round(t * 1e3, 1) for t in times]})", flush=True)
            for start, host, gap, gpu in chunk_trace(llm, prompts[2]):
                print(f"  chunk at {start}: host {host:.1f} ms in run_window, {gap:.1f} ms before it; "
                      f"GPU {gpu:.1f} ms", flush=True)
            if chunk == chunks[0]:
                chunk_trace(llm, prompts[3], python_profile=True)
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    first_token_s(llm, prompts[2])
                torch.cuda.synchronize()
                print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=args.top,
                                                max_name_column_width=60))
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top,
                                                max_name_column_width=60))
        finally:
            llm.stop()
            del llm
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
