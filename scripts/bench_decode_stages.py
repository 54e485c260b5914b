"""Decode attention's two kernels apart, side by side with the whole op in one run on one GPU:
`python scripts/bench_decode_stages.py [--cases 32768x8,32768x1,1024x1] [--json PATH]`.

The engine's pinned configs (engine.kernels.triton_decode.DEFAULT_CONFIGS), 8B-class shape, bf16
and int8 KV, on engine.benchmarks.kernels' cases. For each case: the whole op timed as that
benchmark times it (CUDA-graph replays over rotating input sets), then the same launches under
torch.profiler, which gives each kernel's own GPU time: stage 1 (`_decode_split_kernel`, every
split's partial result) and stage 2 (`_decode_merge_kernel`, the splits merged). Stage 1 moves
all the KV bytes, so its fraction of the copy says how far the kernel that streams the cache is
from the bandwidth limit, and what the merge and the launch between the two add. Needs CUDA.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from engine.benchmarks.kernels import copy_bandwidth, make_case, time_graph  # noqa: E402
from engine.kernels.triton_decode import DEFAULT_CONFIGS, paged_decode_attention_triton  # noqa: E402

STAGES = {"_decode_split_kernel": "stage1", "_decode_merge_kernel": "stage2"}


def parse_cases(text: str) -> list[tuple[int, int]]:
    """'32768x8,1024x1' -> [(32768, 8), (1024, 1)] (context tokens x batch)."""
    cases = []
    for part in text.split(","):
        ctx, sep, batch = part.strip().partition("x")
        if not (sep and ctx.isdigit() and batch.isdigit() and int(ctx) > 0 and int(batch) > 0):
            raise ValueError(f"case {part!r}: expected CONTEXTxBATCH, e.g. 32768x8")
        cases.append((int(ctx), int(batch)))
    return cases


def stage_times(sets, cfg, calls: int = 10) -> dict[str, float]:
    """Median GPU microseconds of each stage's kernel over `calls` rounds of the input sets."""
    for a in sets:                      # compiled and warm before profiling
        paged_decode_attention_triton(*a, config=cfg)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(calls):
            for a in sets:
                paged_decode_attention_triton(*a, config=cfg)
        torch.cuda.synchronize()
    seen: dict[str, list[float]] = {name: [] for name in STAGES.values()}
    for ev in prof.events():
        if ev.device_type.name == "CUDA" and ev.name in STAGES:
            seen[STAGES[ev.name]].append(ev.device_time)
    missing = [name for name, t in seen.items() if not t]
    if missing:
        raise RuntimeError(f"the profiler saw no {', '.join(missing)} kernel")
    return {name: statistics.median(t) for name, t in seen.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_decode_stages.py", description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="32768x8,32768x1,1024x1", help="CONTEXTxBATCH,... (default %(default)s)")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args(argv)
    try:
        cases = parse_cases(args.cases)
    except ValueError as e:
        print(f"bench_decode_stages: --cases: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench_decode_stages: needs a CUDA GPU", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    copy = copy_bandwidth()
    report = {"gpu": props.name, "torch": torch.__version__, "copy_GBps": copy, "rows": []}
    print(f"{props.name}  torch {torch.__version__}  copy {copy:.0f} GB/s (read + write)")
    print(f"{'kv':5} {'case':>9} {'op us':>8} {'of copy':>8} {'stage 1 us':>11} {'of copy':>8} {'stage 2 us':>11}")
    for int8 in (False, True):
        cfg = DEFAULT_CONFIGS[int8]
        kv = "int8" if int8 else "bf16"
        for ctx, batch in cases:
            sets, nbytes = make_case(batch, ctx, int8, gen)
            op_us = time_graph(sets, cfg) * 1e3
            st = stage_times(sets, cfg)
            del sets
            torch.cuda.empty_cache()
            row = {"kv": kv, "ctx": ctx, "batch": batch, "MB": nbytes / 1e6, "op_us": op_us,
                   "op_of_copy": nbytes / (op_us * 1e-6) / 1e9 / copy, "stage1_us": st["stage1"],
                   "stage1_of_copy": nbytes / (st["stage1"] * 1e-6) / 1e9 / copy, "stage2_us": st["stage2"]}
            report["rows"].append(row)
            print(f"{kv:5} {f'{ctx}x{batch}':>9} {op_us:8.1f} {row['op_of_copy']:8.3f} {st['stage1']:11.1f} "
                  f"{row['stage1_of_copy']:8.3f} {st['stage2']:11.1f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
