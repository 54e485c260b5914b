"""Decode attention's two kernels apart, side by side with the whole op in one run on one GPU:
`python scripts/bench_decode_stages.py [--cases 32768x8,32768x1,1024x1] [--int8-configs CFG;...]
[--json PATH]`.

The engine's pinned configs (engine.kernels.triton_decode.DEFAULT_CONFIGS), 8B-class shape, bf16
and int8 KV, on engine.benchmarks.kernels' cases. For each case: the whole op timed as that
benchmark times it (CUDA-graph replays over rotating input sets), after each of its L2 flushes
(FLUSHES: do_bench's zeroing write, and a read), then the same launches
under torch.profiler, back to back with no flush, which gives each kernel's own GPU time: stage 1
(`_decode_split_kernel`, every split's partial result) and stage 2 (`_decode_merge_kernel`, the
splits merged). Stage 1 moves all the KV bytes, so its fraction of the copy says how far the
kernel that streams the cache is from the bandwidth limit; the op's times say what the merge, the
launches and the flush's dirty lines add. Fractions are against the copy timed the same way (the
profiled stages against the read-flush copy). `--int8-configs` adds rows for other int8 launch
configs (engine.benchmarks.kernels' config strings), timed after the pin's in the same run.
Needs CUDA.
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

from engine.benchmarks.kernels import config_text, make_case, parse_config  # noqa: E402
from engine.kernels.triton_decode import DEFAULT_CONFIGS, paged_decode_attention_triton  # noqa: E402

STAGES = {"_decode_split_kernel": "stage1", "_decode_merge_kernel": "stage2"}
# The timing loop and graph replay repeat engine.benchmarks.kernels' (do_bench's loop) with a choice
# of flush: a commit under engine/ re-dates the engine wheel (SOURCE_DATE_EPOCH) and so unbinds the
# gpu-h200 lane's evidence, so this script carries them until the lane runs again.
# How the L2 is emptied before each timed call: "write" zeroes 256 MB, as triton.testing.do_bench
# (and so engine.benchmarks.kernels) does, which leaves the L2 full of dirty lines that the timed
# call must write back first (traffic of the harness, not of the op); "read" sums the same 256 MB,
# which leaves it full of clean lines.
FLUSHES = ("write", "read")
FLUSH_BYTES = 256 * 2**20
_flush_buffer: list[torch.Tensor] = []


def flush_l2(kind: str) -> None:
    if kind not in FLUSHES:
        raise ValueError(f"flush {kind!r}: expected one of {', '.join(FLUSHES)}")
    if not _flush_buffer:
        _flush_buffer.append(torch.zeros(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda"))
    if kind == "write":
        _flush_buffer[0].zero_()
    else:
        _flush_buffer[0].sum()


def bench_ms(fn, flush: str, warmup_ms: float = 25, rep_ms: float = 200) -> float:
    """Median ms of fn over CUDA-event-timed calls, the L2 flushed before each; with "write",
    triton.testing.do_bench's loop and statistic."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush_l2(flush)
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = start.elapsed_time(end) / 5
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    n = max(1, int(rep_ms / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush_l2(flush)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def copy_bandwidth(flush: str, nbytes: int = 2 * 2**30) -> float:
    """GB/s of a device-to-device copy (bytes read plus written), as engine.benchmarks.kernels'."""
    src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / (bench_ms(lambda: dst.copy_(src), flush, warmup_ms=50, rep_ms=300) * 1e-3) / 1e9


def time_graph(arg_sets, cfg, flush: str) -> float:
    """Median ms a decode call, from CUDA-graph replays over the rotating input sets, as
    engine.benchmarks.kernels.time_graph times them, after the given flush."""
    def run_all():
        for a in arg_sets:
            paged_decode_attention_triton(*a, config=cfg)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run_all()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run_all()
    ms = bench_ms(g.replay, flush)
    del g
    return ms / len(arg_sets)


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
    ap.add_argument("--int8-configs", default="",
                    help="'bn,w,st,split[,e][,n][,cN];...': int8 configs timed after the pin's")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args(argv)
    try:
        cases = parse_cases(args.cases)
    except ValueError as e:
        print(f"bench_decode_stages: --cases: {e}", file=sys.stderr)
        return 2
    extra = []
    for text in filter(None, (t.strip() for t in args.int8_configs.split(";"))):
        try:
            extra.append((text, parse_config(text)))
        except ValueError as e:
            print(f"bench_decode_stages: --int8-configs: {text!r}: {e}", file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("bench_decode_stages: needs a CUDA GPU", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    copy = {flush: copy_bandwidth(flush) for flush in FLUSHES}
    report = {"gpu": props.name, "torch": torch.__version__, "copy_GBps": copy, "rows": []}
    print(f"{props.name}  torch {torch.__version__}  copy {copy['write']:.0f} GB/s after a write flush, "
          f"{copy['read']:.0f} after a read flush (read + write bytes)")
    print(f"{'kv':5} {'case':>9} {'op us, write flush':>19} {'of copy':>8} {'op us, read flush':>18} {'of copy':>8} "
          f"{'stage 1 us':>11} {'of copy':>8} {'stage 2 us':>11}  config")
    runs = [(kv, f"pin {config_text(DEFAULT_CONFIGS[kv == 'int8'])}", DEFAULT_CONFIGS[kv == "int8"])
            for kv in ("bf16", "int8")]
    runs += [("int8", text, cfg) for text, cfg in extra]
    for kv, label, cfg in runs:
        int8 = kv == "int8"
        for ctx, batch in cases:
            sets, nbytes = make_case(batch, ctx, int8, gen)
            op_us = {flush: time_graph(sets, cfg, flush) * 1e3 for flush in FLUSHES}
            st = stage_times(sets, cfg)
            del sets
            torch.cuda.empty_cache()

            def of_copy(us, flush):
                return nbytes / (us * 1e-6) / 1e9 / copy[flush]

            row = {"kv": kv, "config": label, "ctx": ctx, "batch": batch, "MB": nbytes / 1e6, "op_us": op_us,
                   "op_of_copy": {flush: of_copy(op_us[flush], flush) for flush in FLUSHES},
                   "stage1_us": st["stage1"], "stage1_of_copy": of_copy(st["stage1"], "read"),
                   "stage2_us": st["stage2"]}
            report["rows"].append(row)
            print(f"{kv:5} {f'{ctx}x{batch}':>9} {op_us['write']:19.1f} {row['op_of_copy']['write']:8.3f} "
                  f"{op_us['read']:18.1f} {row['op_of_copy']['read']:8.3f} {st['stage1']:11.1f} "
                  f"{row['stage1_of_copy']:8.3f} {st['stage2']:11.1f}  {label}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
