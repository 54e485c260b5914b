"""`python -m engine.benchmarks.cpu_reference`: the engine against transformers on the CPU, on the
reference model's float32 weights, side by side in one run.

Rows: long-prompt prefill (the CPU qualification lanes prefill prompts of 7,000+ tokens) and
batch-1 greedy decode after a short chat prompt, engine against transformers; and the engine's
batched decode throughput (BATCH chat prompts decoded together) against its own batch 1. Both runners load the same imported model
directory (the GGUF's float32 dequantization), compute in float32 and get the same token ids.
Each round runs the two back to back on each row, alternating which goes first, so a change
in the machine's load hits both alike; the table gives each row's medians over the rounds, their
ratio, and the median of the per-round (back-to-back) ratios. Each runner computes as it would
alone in its process: transformers on a thread that ends after each call, the engine on its
scheduling thread, stopped after each call, so no other thread's OpenMP pool is alive while
either runs (engine.runtime.cpu_threads says what one costs).

    python -m engine.benchmarks.cpu_reference --model .assay/models/smollm2-135m-instruct
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

import torch

from engine.model.chat import render_chat
from engine.model.projection import Projection
from engine.runtime.cpu_threads import on_fresh_thread
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams

DEFAULT_MODEL = ".assay/models/smollm2-135m-instruct"
DECODE_QUESTION = "Write a short story about a lighthouse keeper."
BATCH_QUESTIONS = [DECODE_QUESTION, "Explain how a refrigerator works.", "List five uses for a paperclip.",
                   "What makes a good cup of tea?", "Describe the water cycle.", "Why is the sky blue?",
                   "Give three tips for learning to cook.", "How do bees make honey?"]


def long_prompt(tokenize, n: int) -> list[int]:
    """n token ids of real text: this package's own source, repeated as needed."""
    root = Path(__file__).resolve().parents[1]
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py")))
    ids = tokenize(text)
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


class Engine:
    name = "engine"

    def __init__(self, model_dir: str, max_len: int, prefill_chunk: int | None, batch: int):
        kw = {} if prefill_chunk is None else {"prefill_chunk": prefill_chunk}
        # Room for the long prompt alone, or for the batch row's short prompts together.
        self.llm = LLM(model_dir, dtype="float32", kv_dtype="float32", device="cpu", max_concurrency=batch,
                       kv_capacity_tokens=max_len + 64, max_model_len=max_len, pending_timeout_s=3600.0, **kw)
        self.tokenize = self.llm.tokenizer.encode

    def greedy(self, ids: list[int], n: int) -> list[int]:
        params = SamplingParams(max_new_tokens=n, ignore_eos=True)
        try:
            return self.llm.generate(ids, params, timeout=3600).token_ids
        finally:
            self.llm.stop()      # its thread, and so its OpenMP pool, ends; the next call starts one

    def greedy_batch(self, prompts: list[list[int]], n: int) -> list[list[int]]:
        """The prompts submitted together, so the scheduler decodes them as one batch."""
        params = SamplingParams(max_new_tokens=n, ignore_eos=True)
        handles = [self.llm.submit(ids, params) for ids in prompts]
        try:
            return [h.result(3600).token_ids for h in handles]
        finally:
            self.llm.stop()

    def close(self) -> None:
        self.llm.stop()


class Transformers:
    name = "transformers"

    def __init__(self, model_dir: str):
        from transformers import AutoModelForCausalLM
        self.model = on_fresh_thread(lambda: AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32).eval())

    def greedy(self, ids: list[int], n: int) -> list[int]:
        return on_fresh_thread(self._greedy, ids, n)

    def _greedy(self, ids: list[int], n: int) -> list[int]:
        with torch.inference_mode():
            out = self.model.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n,
                                      do_sample=False, pad_token_id=0, eos_token_id=None)
        return out[0, len(ids):].tolist()

    def close(self) -> None:
        pass


def timed(fn) -> tuple[float, list[int]]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def prefill_tok_s(runner, ids: list[int]) -> tuple[float, list[int]]:
    """Prompt tokens per second to the first generated token (prefill plus one greedy step)."""
    dt, out = timed(lambda: runner.greedy(ids, 1))
    return len(ids) / dt, out


def decode_tok_s(runner, ids: list[int], n: int) -> tuple[float, list[int]]:
    """Decode alone: (n - 1) tokens over time(n tokens) - time(1 token)."""
    t1, _ = timed(lambda: runner.greedy(ids, 1))
    tn, out = timed(lambda: runner.greedy(ids, n))
    return (n - 1) / max(tn - t1, 1e-9), out


def batch_decode_tok_s(engine: Engine, prompts: list[list[int]], n: int) -> tuple[float, list[list[int]]]:
    """Generated tokens per second of len(prompts) sequences decoded together, decode alone:
    len(prompts) * (n - 1) tokens over time(n tokens each) - time(1 token each)."""
    t1, _ = timed(lambda: engine.greedy_batch(prompts, 1))
    tn, out = timed(lambda: engine.greedy_batch(prompts, n))
    return len(prompts) * (n - 1) / max(tn - t1, 1e-9), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.benchmarks.cpu_reference", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="imported model directory (float32 safetensors)")
    ap.add_argument("--prompt-tokens", type=int, default=7400)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8, help="sequences decoded together in the batch row")
    ap.add_argument("--prefill-chunk", type=int, default=None, help="the engine's prefill_chunk (default: its own)")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    if not (Path(args.model) / "config.json").is_file():
        print(f"cpu_reference: no model directory at {args.model} (run `make model`)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    max_len = args.prompt_tokens + args.new_tokens + 64
    if not 1 <= args.batch <= len(BATCH_QUESTIONS):
        ap.error(f"--batch must be 1..{len(BATCH_QUESTIONS)}")
    runners = [Engine(args.model, max_len, args.prefill_chunk, args.batch), Transformers(args.model)]
    enc = runners[0].tokenize
    long_ids = long_prompt(enc, args.prompt_tokens)
    chat_ids = enc(render_chat(args.model, [{"role": "user", "content": DECODE_QUESTION}]))
    for r in runners:                       # warm-up: first-call allocations and thread pools
        r.greedy(chat_ids, 2)
    measure = {"prefill": lambda r: prefill_tok_s(r, long_ids),
               "decode": lambda r: decode_tok_s(r, chat_ids, args.new_tokens)}
    rows = {k: {r.name: [] for r in runners} for k in measure}
    pair_ratios = {k: [] for k in measure}
    same = {k: True for k in measure}
    batch_prompts = [enc(render_chat(args.model, [{"role": "user", "content": q}]))
                     for q in BATCH_QUESTIONS[:args.batch]]
    kept_copies = any(m.rows is not None for m in runners[0].llm.model.modules() if isinstance(m, Projection))
    other = "one-row layouts" if kept_copies else "row-major copies"
    batch = {"batch_1_tok_s": [], f"batch_{args.batch}_tok_s": [], f"batch_{args.batch}_other_choice_tok_s": [],
             "ratios": [], "first_sequence_same": True, "other_choice_same": True,
             "row_major_copies": kept_copies, "other_choice": other}
    for i in range(args.rounds):
        for k, fn in measure.items():
            # The two runners back to back, the order alternating by round, so that drift in the
            # machine's load lands on both; each pair gives one ratio.
            order = runners if i % 2 == 0 else runners[::-1]
            outs = {}
            for r in order:
                rate, outs[r.name] = fn(r)
                rows[k][r.name].append(rate)
            pair_ratios[k].append(rows[k]["engine"][-1] / rows[k]["transformers"][-1])
            same[k] = same[k] and outs["engine"] == outs["transformers"]
            print(f"round {i + 1} {k}: engine {rows[k]['engine'][-1]:.1f} tok/s, transformers "
                  f"{rows[k]['transformers'][-1]:.1f} tok/s", file=sys.stderr, flush=True)
        # The engine's batch against its own batch 1, back to back: the same decode row's figure
        # would be further away in time.
        one, alone = decode_tok_s(runners[0], batch_prompts[0], args.new_tokens)
        many, outs = batch_decode_tok_s(runners[0], batch_prompts, args.new_tokens)
        # The same batch under the other multi-row choice (engine.model.layout.multi_row_copies_pay):
        # without the row-major copies where the engine kept them, with copies made for the row
        # where it kept none. What the choice buys on this CPU.
        model = runners[0].llm.model
        kept = {m: m.rows for m in model.modules() if isinstance(m, Projection)}
        try:
            for m in kept:
                m.rows = None if kept_copies else on_fresh_thread(m.weight.detach().contiguous)
            col, col_outs = batch_decode_tok_s(runners[0], batch_prompts, args.new_tokens)
        finally:
            for m, r in kept.items():
                m.rows = r
        batch["batch_1_tok_s"].append(one)
        batch[f"batch_{args.batch}_tok_s"].append(many)
        batch[f"batch_{args.batch}_other_choice_tok_s"].append(col)
        batch["ratios"].append(many / one)
        batch["first_sequence_same"] = batch["first_sequence_same"] and outs[0] == alone
        batch["other_choice_same"] = batch["other_choice_same"] and col_outs == outs
        print(f"round {i + 1} batch: engine batch {args.batch} {many:.1f} tok/s ({other} "
              f"{col:.1f}), batch 1 {one:.1f} tok/s", file=sys.stderr, flush=True)
    for r in runners:
        r.close()
    med = {k: {n: statistics.median(v) for n, v in per.items()} for k, per in rows.items()}
    result = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "threads": args.threads, "load_avg_1m": os.getloadavg()[0], "torch": torch.__version__},
        "model": args.model, "prompt_tokens": {"prefill": len(long_ids), "decode": len(chat_ids)},
        "new_tokens": args.new_tokens, "rounds": args.rounds, "prefill_chunk": runners[0].llm.scheduler.prefill_chunk,
        "tok_s_median": med, "tok_s_all": rows, "greedy_tokens_identical": same,
        "ratio_engine_over_transformers": {k: v["engine"] / v["transformers"] for k, v in med.items()},
        "pair_ratios": pair_ratios,
        "pair_ratio_median": {k: statistics.median(v) for k, v in pair_ratios.items()},
        "batch": {**batch, "size": args.batch, "ratio_median": statistics.median(batch["ratios"])},
    }
    print(f"{'row':<34}{'engine tok/s':>14}{'transformers tok/s':>20}{'ratio':>8}{'pair ratio':>12}"
          f"{'same tokens':>13}")
    labels = {"prefill": f"prefill, {len(long_ids)}-token prompt", "decode": f"decode, batch 1, {args.new_tokens} new"}
    for k, label in labels.items():
        e, t = med[k]["engine"], med[k]["transformers"]
        print(f"{label:<34}{e:>14.1f}{t:>20.1f}{e / t:>8.2f}{result['pair_ratio_median'][k]:>12.2f}"
              f"{str(same[k]):>13}")
    b1, bn = statistics.median(batch["batch_1_tok_s"]), statistics.median(batch[f"batch_{args.batch}_tok_s"])
    print(f"{f'engine decode, batch {args.batch} / batch 1':<34}{bn:>14.1f}{b1:>20.1f}{bn / b1:>8.2f}"
          f"{result['batch']['ratio_median']:>12.2f}{str(batch['first_sequence_same']):>13}")
    bc = statistics.median(batch[f"batch_{args.batch}_other_choice_tok_s"])
    print(f"{f'  same, {other}':<34}{bc:>14.1f}{b1:>20.1f}{bc / b1:>8.2f}{'':>12}"
          f"{str(batch['other_choice_same']):>13}")
    print(json.dumps(result, sort_keys=True))
    if args.json:
        Path(args.json).write_text(json.dumps(result, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
