"""Time to first token and decode rate of one request at a time, through the engine's scheduler
(the serving path: prefill, then pipelined greedy decode), with the persistent batch-1 step and
without it, alternating in one process on the same random 8B-class model and prompts.

    python3 scripts/bench_first_token.py [--rounds 3] [--runs 5] [--prompt 1040] [--new 256]

Each token's time is taken as it leaves the engine (RequestHandle.stream), so the figures do not
depend on which tokens have visible text, unlike a server client's first text chunk. Needs CUDA.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.benchmarks.decode import LLAMA_8B, hf_model  # noqa: E402
from engine.benchmarks.harness import BenchLLM  # noqa: E402
from engine.model.config import ModelConfig  # noqa: E402
from engine.model.weights import build_model  # noqa: E402
from engine.runtime import persistent_decode  # noqa: E402
from engine.runtime.sampling import SamplingParams  # noqa: E402


def one_engine(cfg, model, on: bool, prompts, new: int) -> dict:
    os.environ[persistent_decode.ENV] = "1" if on else "0"
    max_len = len(prompts[0]) + new + 64
    llm = BenchLLM(cfg, model, kv_dtype="bf16", device=torch.device("cuda"), kv_capacity_tokens=max_len + 64,
                   max_concurrency=1, max_model_len=max_len)
    try:
        status = llm.status()
        assert status["persistent_decode"] is on, status["persistent_decode_off"]
        llm.generate(prompts[0][:64], SamplingParams(max_new_tokens=8, ignore_eos=True))     # warm
        ttft, rate = [], []
        for p in prompts:
            t0 = time.perf_counter()
            times = [time.perf_counter() for _ in llm.submit(p, SamplingParams(max_new_tokens=new, ignore_eos=True)).stream()]
            ttft.append(times[0] - t0)
            rate.append((len(times) - 1) / (times[-1] - times[0]))
        return {"ttft_s": statistics.median(ttft), "decode_tok_s": statistics.median(rate),
                "ttft_all": [round(x, 4) for x in ttft], "rate_all": [round(x, 2) for x in rate]}
    finally:
        llm.stop()
        del llm
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5, help="requests per engine and round")
    ap.add_argument("--prompt", type=int, default=1040, help="prompt tokens (the lane's benchmark: 1040)")
    ap.add_argument("--new", type=int, default=256, help="tokens generated per request")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_first_token needs CUDA", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    cfg = ModelConfig.from_dict(LLAMA_8B, where="bench config 8b")
    model = build_model(cfg, dict(hf_model(LLAMA_8B, dev).state_dict()), torch.bfloat16, dev,
                        args.prompt + args.new + 128, "hf model")
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, cfg.vocab_size, (args.prompt,), generator=g).tolist() for _ in range(args.runs)]
    print(f"{torch.cuda.get_device_name()}  prompt {args.prompt} tokens, {args.new} new, {args.runs} requests a round")
    for r in range(args.rounds):
        for on in (True, False):
            x = one_engine(cfg, model, on, prompts, args.new)
            print(f"round {r} persistent {'on ' if on else 'off'}: first token {x['ttft_s'] * 1e3:6.1f} ms  "
                  f"decode {x['decode_tok_s']:6.1f} tok/s  (first token {x['ttft_all']}; decode {x['rate_all']})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
