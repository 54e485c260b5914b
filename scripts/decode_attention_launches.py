"""Launch the engine's decode attention (pinned config) on one of engine.benchmarks.kernels' cases
a few times, for Nsight Compute to profile from outside:

    M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
    M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active"
    M="$M,smsp__warps_eligible.avg.per_cycle_active"
    M="$M,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
    ncu --clock-control none --kernel-name regex:_decode_split_kernel --launch-skip 2 --launch-count 1 \\
        --csv --metrics "$M" python3 scripts/decode_attention_launches.py --kv int8 --case 32768x8

(the stall reasons as cycles stalled per issued instruction; docs/perf/kernels.md has a run).

`--clock-control none` leaves the GPU's clocks as they are (ncu's default holds them at base,
which slows the kernel against the benchmarks). Skipping the first launches leaves out Triton's
compilation and the first touch of the caches. Needs CUDA.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/decode_attention_launches.py", description=__doc__.splitlines()[0])
    ap.add_argument("--kv", choices=("bf16", "int8"), default="int8")
    ap.add_argument("--case", default="32768x8", help="CONTEXTxBATCH (default %(default)s)")
    ap.add_argument("--launches", type=int, default=4, help="calls of the op (default %(default)s)")
    args = ap.parse_args(argv)
    ctx, sep, batch = args.case.partition("x")
    if not (sep and ctx.isdigit() and batch.isdigit() and int(ctx) > 0 and int(batch) > 0):
        print(f"decode_attention_launches: --case {args.case!r}: expected CONTEXTxBATCH, e.g. 32768x8",
              file=sys.stderr)
        return 2
    if args.launches < 1:
        print(f"decode_attention_launches: --launches must be at least 1, got {args.launches}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("decode_attention_launches: needs a CUDA GPU", file=sys.stderr)
        return 2
    from engine.benchmarks.kernels import make_case
    from engine.kernels.triton_decode import DEFAULT_CONFIGS, paged_decode_attention_triton
    int8 = args.kv == "int8"
    sets, nbytes = make_case(int(batch), int(ctx), int8, torch.Generator().manual_seed(0))
    for i in range(args.launches):
        paged_decode_attention_triton(*sets[i % len(sets)], config=DEFAULT_CONFIGS[int8])
    torch.cuda.synchronize()
    print(f"{args.launches} launches of {args.kv} decode attention at {ctx} x {batch} ({nbytes / 1e6:.1f} MB a call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
