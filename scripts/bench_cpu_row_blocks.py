"""The engine's long CPU prefill with its row-wise work in one pass against blocks of rows, side
by side in one run.

    .venv/bin/python scripts/bench_cpu_row_blocks.py [--tokens 7400] [--blocks 512,1024,2048]
        [--rounds 3] [--json out.json]

engine.model.transformer computes a CPU prefill's projections, RoPE, KV write and SwiGLU in blocks
of ROW_BLOCK rows (MLP.forward says why). This prefills the reference model's benchmark prompt
(engine.benchmarks.cpu_reference's long prompt, float32, 2 threads) with ROW_BLOCK set to the
prompt's length (one pass, as before blocks) and to each `--blocks` value, the settings
alternating in every round so that drift on a shared machine falls on all alike, after one
warm-up prefill of each. Each row gives the median prefill time, its prompt tokens per second,
the ratio of one pass's median to the row's (above 1: faster), and whether the logits of the
prompt's last row have the same bits as one pass's. The prefill runs on this
thread (scripts/profile_cpu_prefill.py's prefill_once), the only OpenMP pool alive.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_cpu_prefill import prefill_once, prompt_ids  # noqa: E402  (a sibling script)

from engine.model import transformer  # noqa: E402

DEFAULT_MODEL = ".assay/models/smollm2-135m-instruct"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--tokens", type=int, default=7400)
    ap.add_argument("--blocks", default="512,1024,2048")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the figures here as well")
    a = ap.parse_args()
    if not (Path(a.model) / "config.json").is_file():
        print(f"bench_cpu_row_blocks: no model directory at {a.model} (run `make model`)", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    from engine.runtime.llm import LLM
    llm = LLM(a.model, dtype="float32", kv_dtype="float32", device="cpu", max_concurrency=1,
              kv_capacity_tokens=a.tokens + 64, max_model_len=a.tokens + 8, pending_timeout_s=3600.0)
    ids = prompt_ids(llm.tokenizer.encode, a.tokens)
    last = {}
    llm.model.lm_head.register_forward_hook(lambda m, args, out: last.__setitem__("row", out[-1].clone()))
    settings = [a.tokens] + [int(b) for b in a.blocks.split(",")]
    kept = transformer.ROW_BLOCK
    times: dict[int, list[float]] = {b: [] for b in settings}
    rows_out = {}
    try:
        for b in settings:                           # warm-up, and each setting's last row
            transformer.ROW_BLOCK = b
            prefill_once(llm, ids)
            rows_out[b] = last["row"]
            print(f"row blocks: warm-up with {b} rows a block done", file=sys.stderr, flush=True)
        for i in range(a.rounds):
            for b in settings:
                transformer.ROW_BLOCK = b
                times[b].append(prefill_once(llm, ids))
            print(f"row blocks: round {i + 1} of {a.rounds}: " +
                  ", ".join(f"{b} {times[b][-1]:.2f} s" for b in settings), file=sys.stderr, flush=True)
    finally:
        transformer.ROW_BLOCK = kept
    base = statistics.median(times[a.tokens])
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {a.threads} threads, "
          f"{a.tokens}-token prefill of {a.model}, {a.rounds} rounds")
    print(f"{'rows a block':>14s} {'median s':>9s} {'tok/s':>7s} {'speedup':>8s} {'same bits':>10s}")
    rows = []
    for b in settings:
        med = statistics.median(times[b])
        same = torch.equal(rows_out[b], rows_out[a.tokens])
        rows.append({"row_block": b, "median_s": med, "tok_s": a.tokens / med, "speedup": base / med,
                     "same_bits": same, "times_s": times[b]})
        label = f"{b} (one pass)" if b == a.tokens else str(b)
        print(f"{label:>14s} {med:9.2f} {a.tokens / med:7.1f} {base / med:8.2f} {str(same):>10s}")
    if a.json:
        Path(a.json).write_text(json.dumps({"tokens": a.tokens, "threads": a.threads, "torch": torch.__version__,
                                            "model": a.model, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
