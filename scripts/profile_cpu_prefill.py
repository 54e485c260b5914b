"""Where the engine's CPU prefill of a long prompt spends its time, operator by operator, and
how far a faster kernel could take it.

    .venv/bin/python scripts/profile_cpu_prefill.py --tokens 7400 [--by-shape] [--json profile.json]

One prefill of a `--tokens` prompt (the benchmark's own long prompt: the engine's source text)
runs on this thread, under torch.profiler, after one warm-up prefill of the same prompt. The
table gives each aten operator's own time and share, and the achieved rate of the two that do
the arithmetic: the fused causal attention and the projections' matrix products (their FLOPs
counted from the model's shapes). An SGEMM of 4096 x 4096 x 4096 measured first in the same run
(the median of five) is the machine's float32 product rate. The ceilings then say what the prefill would take if the
attention ran at the products' achieved rate, and if in addition every other operator were
free: a 1.2x faster prefill needs a ceiling above 1.2.

The prefill is driven on this thread, not the engine's scheduling thread, so the profiler sees
its operators and only one OpenMP pool is alive (engine.runtime.cpu_threads says why that
matters).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ATTENTION_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"
PRODUCT_OP = "aten::mm"


def prompt_ids(tokenize, n: int) -> list[int]:
    from engine.benchmarks.cpu_reference import long_prompt
    return long_prompt(tokenize, n)


def flops(cfg, n: int) -> tuple[float, float]:
    """(attention, products) FLOPs of prefilling n tokens from an empty cache. Attention: the
    q.k and p.v products over the n(n+1)/2 causal pairs of every query head. Products: every
    projection of every layer over n rows, plus the lm_head over the one row that is sampled."""
    attn = cfg.num_layers * 2 * 2 * cfg.num_heads * cfg.head_dim * n * (n + 1) / 2
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    per_row = cfg.hidden_size * (q + 2 * kv) + q * cfg.hidden_size + 3 * cfg.hidden_size * cfg.intermediate_size
    products = cfg.num_layers * 2 * n * per_row + 2 * cfg.hidden_size * cfg.vocab_size
    return attn, products


def sgemm_gflops(size: int = 4096, reps: int = 5) -> float:
    """The median of reps products, after one warm-up."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * size ** 3 / statistics.median(times) / 1e9


def prefill_once(llm, ids: list[int]) -> float:
    """Seconds to prefill ids and choose the first token, driven on this thread."""
    from engine.runtime.sampling import SamplingParams
    from engine.runtime.sequence import Sequence, Status
    seq = Sequence(ids, SamplingParams(max_new_tokens=1, ignore_eos=True), None, llm.draft_tokens)
    llm.scheduler.add(seq)
    t = time.perf_counter()
    while seq.status is not Status.FINISHED:
        llm.scheduler.step()
    took = time.perf_counter() - t
    if seq.error is not None or seq.finish_reason != "length":
        raise RuntimeError(f"the prefill ended with {seq.finish_reason!r}: {seq.error}")
    return took


def profile_prefill(model_dir: Path, n: int, top: int, by_shape: bool = False) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from engine.runtime.llm import LLM
    llm = LLM(str(model_dir), dtype="float32", kv_dtype="float32", device="cpu", max_concurrency=1,
              kv_capacity_tokens=n + 64, max_model_len=n + 8, pending_timeout_s=3600.0)
    ids = prompt_ids(llm.tokenizer.encode, n)
    print("profile: SGEMM reference", file=sys.stderr, flush=True)
    sgemm = sgemm_gflops()
    print(f"profile: warm-up prefill of {n} tokens", file=sys.stderr, flush=True)
    warm_s = prefill_once(llm, ids)
    print("profile: profiled prefill", file=sys.stderr, flush=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=by_shape) as prof:
        wall_s = prefill_once(llm, ids)
    events = sorted(prof.key_averages(), key=lambda ev: -ev.self_cpu_time_total)
    total_s = sum(ev.self_cpu_time_total for ev in events) / 1e6
    # By shape, the table splits an operator's rows by their inputs' shapes (which product,
    # which elementwise op); the rates and ceilings still use each operator's total.
    rows = sorted(prof.key_averages(group_by_input_shape=True),
                  key=lambda ev: -ev.self_cpu_time_total) if by_shape else events
    attn_flops, prod_flops = flops(llm.config, n)
    rate = {ATTENTION_OP: attn_flops, PRODUCT_OP: prod_flops}
    ops = []
    for ev in rows[:top]:
        s = ev.self_cpu_time_total / 1e6
        row = {"op": ev.key, "calls": ev.count, "seconds": round(s, 4),
               "share": round(s / total_s, 4) if total_s else 0.0}
        if by_shape:
            row["shapes"] = [list(x) for x in ev.input_shapes]
        elif ev.key in rate and s > 0:
            row["gflops"] = round(rate[ev.key] / s / 1e9, 1)
        ops.append(row)
    by_op = {ev.key: ev.self_cpu_time_total / 1e6 for ev in events}
    attn_s, prod_s = by_op.get(ATTENTION_OP, 0.0), by_op.get(PRODUCT_OP, 0.0)
    if not attn_s or not prod_s:
        raise RuntimeError(f"the profile holds no {ATTENTION_OP} or no {PRODUCT_OP}: this engine "
                           "does not prefill through them, and the ceilings below would mean nothing")
    prod_rate = prod_flops / prod_s
    attn_at_prod_rate = attn_flops / prod_rate
    other_s = total_s - attn_s - prod_s
    return {
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__},
        "tokens": n, "warmup_s": round(warm_s, 3), "wall_s": round(wall_s, 3),
        "tok_s": round(n / wall_s, 1), "profiled_s": round(total_s, 3),
        "sgemm_4096_gflops": round(sgemm, 1),
        "attention": {"seconds": round(attn_s, 3), "gflops": round(attn_flops / attn_s / 1e9, 1)},
        "products": {"seconds": round(prod_s, 3), "gflops": round(prod_rate / 1e9, 1)},
        "other_seconds": round(other_s, 3),
        # What the prefill would take with the attention at the products' achieved rate, and with
        # that and every other operator free; as speed-ups over the profiled time.
        "ceiling_attention_at_product_rate": round(total_s / (total_s - attn_s + attn_at_prod_rate), 3),
        "ceiling_and_other_ops_free": round(total_s / (attn_at_prod_rate + prod_s), 3),
        "ops": ops,
    }


def report(r: dict) -> str:
    lines = [f"prefill of {r['tokens']} tokens on {r['machine']['threads']} threads, torch "
             f"{r['machine']['torch']}: {r['wall_s']:.2f} s ({r['tok_s']:.1f} tok/s; warm-up "
             f"{r['warmup_s']:.2f} s); operators' own time {r['profiled_s']:.2f} s",
             f"SGEMM 4096^3 in the same run: {r['sgemm_4096_gflops']:.0f} GFLOPS", "",
             f"{'operator':52s} {'calls':>6s} {'s':>8s} {'share':>6s} {'GFLOPS':>7s}"]
    for o in r["ops"]:
        gf = f"{o['gflops']:7.0f}" if "gflops" in o else ""
        shapes = " " + " ".join("x".join(map(str, x)) for x in o["shapes"] if x) if "shapes" in o else ""
        lines.append(f"{o['op'][:52]:52s} {o['calls']:6d} {o['seconds']:8.3f} {100 * o['share']:5.1f}% {gf}{shapes}")
    lines += ["",
              f"attention {r['attention']['seconds']:.2f} s at {r['attention']['gflops']:.0f} GFLOPS; "
              f"products {r['products']['seconds']:.2f} s at {r['products']['gflops']:.0f}; "
              f"everything else {r['other_seconds']:.2f} s",
              f"ceiling with the attention at the products' rate: {r['ceiling_attention_at_product_rate']:.2f}x; "
              f"and every other operator free as well: {r['ceiling_and_other_ops_free']:.2f}x"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=Path(".assay/models/smollm2-135m-instruct"),
                    help="an imported model directory (`make model` makes the reference model's)")
    ap.add_argument("--tokens", type=int, default=7400, help="prompt length (default 7400)")
    ap.add_argument("--top", type=int, default=12, help="operators in the table (default 12)")
    ap.add_argument("--by-shape", action="store_true",
                    help="split the table's rows by the operators' input shapes")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if not (args.model / "config.json").is_file():
        print(f"profile_cpu_prefill: --model {args.model}: no config.json there; `make model` "
              "imports the reference model", file=sys.stderr)
        return 2
    if args.tokens < 2:
        print(f"profile_cpu_prefill: --tokens {args.tokens}: a prompt needs at least 2 tokens",
              file=sys.stderr)
        return 2
    try:
        r = profile_prefill(args.model, args.tokens, args.top, args.by_shape)
    except (RuntimeError, ValueError) as e:
        print(f"profile_cpu_prefill: {e}", file=sys.stderr)
        return 1
    print(report(r))
    if args.json:
        args.json.write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
