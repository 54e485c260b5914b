"""Decode attention's split size against the context length, side by side in one run on one GPU:
`python scripts/bench_decode_splits.py [--contexts 1024,4096,...] [--rounds 1] [--json PATH]`.

The engine's kernels with their pinned launch configs (engine.kernels.triton_decode.DEFAULT_CONFIGS)
and only the split size changed, 8B-class shape, bf16 and int8 KV, batch 1 and 8
(engine.benchmarks.kernels' cases and CUDA-graph timing). Each case times every split in turn,
round after round, and keeps each one's median. It prints the fastest split per case: the data
for a split chosen from a sequence's own length (docs/perf/kernels.md). Needs CUDA.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from engine.benchmarks.kernels import copy_bandwidth, make_case, time_graph  # noqa: E402
from engine.kernels.triton_decode import DEFAULT_CONFIGS  # noqa: E402

# Always including the pinned split (384 for int8 since commit 0fdbed0).
SPLITS = {False: tuple(sorted({256, 512, DEFAULT_CONFIGS[False].split_tokens})),
          True: tuple(sorted({256, 512, 1024, DEFAULT_CONFIGS[True].split_tokens}))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_decode_splits.py", description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", default="1024,4096,8192,16384,24576,32768",
                    help="comma-separated context lengths (tokens)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_decode_splits: needs a CUDA GPU", file=sys.stderr)
        return 2
    contexts = [int(c) for c in args.contexts.split(",")]
    gen = torch.Generator().manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    report = {"gpu": props.name, "torch": torch.__version__, "copy_GBps": copy_bandwidth(), "rows": []}
    print(f"{props.name}  torch {torch.__version__}  copy {report['copy_GBps']:.0f} GB/s (read + write)")
    for int8 in (False, True):
        pinned = DEFAULT_CONFIGS[int8]
        configs = {split: dataclasses.replace(pinned, split_tokens=split) for split in SPLITS[int8]}
        kv = "int8" if int8 else "bf16"
        print(f"\n{kv}, pinned split {pinned.split_tokens}; us per call at each split, then the fastest")
        for ctx in contexts:
            for batch in (1, 8):
                sets, _ = make_case(batch, ctx, int8, gen)
                times = {split: [] for split in configs}
                for _ in range(args.rounds):
                    for split, cfg in configs.items():
                        times[split].append(time_graph(sets, cfg) * 1e3)
                del sets
                torch.cuda.empty_cache()
                us = {split: statistics.median(t) for split, t in times.items()}
                best = min(us, key=us.get)
                report["rows"].append({"kv": kv, "ctx": ctx, "batch": batch, "us": us, "fastest": best})
                print(f"  {ctx:>6} x {batch}  " + "  ".join(f"{split:>5}: {t:6.1f}" for split, t in us.items())
                      + f"   fastest {best}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
