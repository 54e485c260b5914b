"""CPU decode speed on the reference model: the engine vs transformers vs llama.cpp, side by side.

All three run in this one process on the same GGUF (the engine and transformers on its float32
dequantization, llama.cpp on the quantized weights), interleaved round by round so a change in
machine load hits all of them alike. Each computes as it would alone in its process: the peers
on threads that end after each call, the engine on its scheduling thread, stopped after each
call, so no other thread's OpenMP pool is alive while one runs (engine.runtime.cpu_threads).
Prints tok/s, the ratios, and greedy agreement with llama.cpp.

    .venv/bin/python scripts/bench_reference.py [--new-tokens 64] [--rounds 3] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.gguf_import import pins  # noqa: E402
from engine.runtime.cpu_threads import on_fresh_thread  # noqa: E402

MODELS = REPO / pins.MODELS_ROOT
BENCH_QUESTION = "Write a short story about a lighthouse keeper."


class Ours:
    name = "engine"

    def __init__(self, model_dir: Path):
        from engine.runtime.llm import LLM
        self.llm = LLM(str(model_dir), dtype="float32", device="cpu", kv_capacity_tokens=4096,
                       max_model_len=2048, max_concurrency=1, pending_timeout_s=600.0)

    def greedy(self, ids: list[int], n: int) -> list[int]:
        from engine.runtime.sampling import SamplingParams
        try:
            return self.llm.generate(ids, SamplingParams(max_new_tokens=n, ignore_eos=True), timeout=600).token_ids
        finally:
            self.llm.stop()      # its thread, and so its OpenMP pool, ends; the next call starts one

    def close(self):
        self.llm.stop()


class Transformers:
    name = "transformers"

    def __init__(self, gguf: Path):
        import torch
        from transformers import AutoModelForCausalLM
        self.torch = torch
        self.model = on_fresh_thread(lambda: AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval())

    def greedy(self, ids: list[int], n: int) -> list[int]:
        return on_fresh_thread(self._greedy, ids, n)

    def _greedy(self, ids: list[int], n: int) -> list[int]:
        with self.torch.no_grad():
            out = self.model.generate(self.torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n,
                                      do_sample=False, pad_token_id=2)
        return out[0, len(ids):].tolist()

    def close(self):
        pass


class LlamaCpp:
    name = "llama.cpp"

    def __init__(self, gguf: Path, threads: int):
        import llama_cpp
        import numpy as np
        from llama_cpp import Llama
        self.np, self.lib = np, llama_cpp
        self.llm = on_fresh_thread(lambda: Llama(model_path=str(gguf), n_ctx=2048, n_threads=threads,
                                                 n_threads_batch=threads, verbose=False, seed=0))

    def greedy(self, ids: list[int], n: int) -> list[int]:
        return on_fresh_thread(self._greedy, ids, n)    # ggml may parallelise with OpenMP too

    def _greedy(self, ids: list[int], n: int) -> list[int]:
        self.llm.reset()
        self.llm.eval(ids)
        out = []
        for _ in range(n):
            # Llama.scores is only filled with logits_all; read the last row from the context instead.
            row = self.lib.llama_get_logits_ith(self.llm.ctx, -1)
            tok = int(self.np.argmax(self.np.ctypeslib.as_array(row, shape=(self.llm.n_vocab(),))))
            out.append(tok)
            if len(out) < n:
                self.llm.eval([tok])
        return out

    def close(self):
        self.llm.close()


def decode_rate(runner, ids: list[int], n: int) -> float:
    """Tokens per second of decode alone: (n - 1) tokens over time(n tokens) - time(1 token)."""
    t0 = time.perf_counter()
    runner.greedy(ids, 1)
    t1 = time.perf_counter()
    runner.greedy(ids, n)
    t2 = time.perf_counter()
    return (n - 1) / max((t2 - t1) - (t1 - t0), 1e-9)


def agreement(ours: Ours, cpp: LlamaCpp, prompts: list[list[int]], n: int) -> dict:
    """Greedy tokens that agree with llama.cpp before the first divergence, per prompt."""
    prefix = []
    for ids in prompts:
        a, b = ours.greedy(ids, n), cpp.greedy(ids, n)
        prefix.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), n))
    return {"prompts": len(prompts), "tokens_per_prompt": n, "agreeing_prefix": prefix,
            "fully_agreeing": sum(p == n for p in prefix), "mean_prefix": statistics.mean(prefix)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--agreement-tokens", type=int, default=32)
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    from engine.model.chat import render_chat
    from tests.engine.gguf.prompts import CHAT_QUESTIONS, RAW_TEXTS, chat_messages

    model_dir, gguf = MODELS / pins.MODEL_DIR, MODELS / pins.GGUF_FILE
    if not (model_dir / "config.json").is_file() or not gguf.is_file():
        print("bench: the reference model is missing; run `make model` first", file=sys.stderr)
        return 2
    ours = Ours(model_dir)
    enc = ours.llm.tokenizer.encode
    bench_ids = enc(render_chat(model_dir, chat_messages(BENCH_QUESTION)))
    runners = [ours, Transformers(gguf)]
    try:
        runners.append(LlamaCpp(gguf, args.threads))
    except ImportError as e:
        print(f"bench: llama.cpp unavailable ({e}); comparing with transformers only", file=sys.stderr)
    rates = {r.name: [] for r in runners}
    for _ in range(args.rounds):
        for r in runners:
            rates[r.name].append(decode_rate(r, bench_ids, args.new_tokens))
    med = {k: statistics.median(v) for k, v in rates.items()}
    result = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                          "threads": args.threads, "load_avg_1m": os.getloadavg()[0]},
              "prompt_tokens": len(bench_ids), "new_tokens": args.new_tokens, "rounds": args.rounds,
              "decode_tok_s_median": med, "decode_tok_s_all": rates,
              "ratio_engine_over": {k: med["engine"] / v for k, v in med.items() if k != "engine"}}
    if len(runners) == 3:
        prompts = [enc(render_chat(model_dir, chat_messages(q))) for q in CHAT_QUESTIONS]
        prompts += [enc(t) for t in RAW_TEXTS]
        result["agreement_with_llama_cpp"] = agreement(ours, runners[2], prompts, args.agreement_tokens)
    for r in runners:
        r.close()
    print(f"{'runner':<14}{'decode tok/s (median)':>24}{'engine / runner':>18}")
    for k, v in med.items():
        print(f"{k:<14}{v:>24.2f}{med['engine'] / v:>18.2f}")
    if "agreement_with_llama_cpp" in result:
        a = result["agreement_with_llama_cpp"]
        print(f"greedy agreement with llama.cpp: {a['fully_agreeing']}/{a['prompts']} prompts identical over "
              f"{a['tokens_per_prompt']} tokens; mean agreeing prefix {a['mean_prefix']:.1f}; "
              f"per prompt {a['agreeing_prefix']}")
    print(json.dumps(result, sort_keys=True))
    if args.json:
        Path(args.json).write_text(json.dumps(result, sort_keys=True, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
