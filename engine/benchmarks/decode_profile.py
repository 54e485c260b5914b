"""`python -m engine.benchmarks.decode_profile`: where a decode step's GPU time goes, kernel by kernel.

Profiles eager decode steps (no CUDA graph, so the profiler sees each launch) of the bench's
8B config at one batch and context, and prints per kernel its launches and microseconds a
step. The sum is the GPU's busy time; engine.benchmarks.decode's "graph ms" minus it is the time the GPU
sits between kernels."""
from __future__ import annotations

import argparse
import json

import torch
from torch.profiler import ProfilerActivity, profile

from engine.benchmarks.decode import LLAMA_8B, TINY, fill_random_kv, hf_model, synthetic_decode
from engine.benchmarks.harness import BenchLLM
from engine.model.config import ModelConfig
from engine.model.weights import build_model


def kernel_table(prof, steps: int) -> list[dict]:
    rows = []
    for ev in prof.key_averages():
        us = getattr(ev, "self_device_time_total", None)
        if us is None:
            us = ev.self_cuda_time_total
        if us <= 0 or ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        rows.append(dict(kernel=ev.key, launches_per_step=ev.count / steps, us_per_step=us / steps))
    return sorted(rows, key=lambda r: -r["us_per_step"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.benchmarks.decode_profile")
    ap.add_argument("--config", choices=["8b", "tiny"], default="8b")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--kv", choices=["bf16", "int8"], default="bf16")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    cfg_dict = LLAMA_8B if args.config == "8b" else TINY
    hf = hf_model(cfg_dict, dev)
    cfg = ModelConfig.from_dict(cfg_dict, where=f"bench config {args.config}")
    max_len = args.context + 4 * args.steps + 64
    model = build_model(cfg, dict(hf.state_dict()), torch.bfloat16, dev, max_len, "hf model")
    del hf
    llm = BenchLLM(cfg, model, kv_dtype=args.kv, device=dev, kv_capacity_tokens=args.batch * (max_len + 16),
                   max_concurrency=args.batch, max_model_len=max_len, cuda_graphs=False)
    fill_random_kv(llm)
    synthetic_decode(llm, args.batch, args.context, 4)          # compile and warm up
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        synthetic_decode(llm, args.batch, args.context, args.steps, warmup=0)
    llm.stop()
    rows = kernel_table(prof, args.steps)
    total = sum(r["us_per_step"] for r in rows)
    launches = sum(r["launches_per_step"] for r in rows)
    print(f"{args.kv} batch {args.batch} context {args.context}: {launches:.0f} kernels, "
          f"{total / 1e3:.3f} ms of kernels a step")
    for r in rows[:args.top]:
        print(f"{r['us_per_step']:9.1f} us {r['launches_per_step']:6.0f}x  {r['kernel'][:110]}")
    report = dict(kernels_per_step=launches, kernel_ms_per_step=total / 1e3, kernels=rows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(dev), args=vars(args), **report), f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
