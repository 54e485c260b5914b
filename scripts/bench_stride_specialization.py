"""The decode-attention kernels as the engine ships them (the block table's width-dependent strides
unspecialized) against the same kernels with Triton's default specialization, side by side in one
run on one GPU: `python scripts/bench_stride_specialization.py [--rounds 3] [--json PATH]`.

8B-class shape, bf16 and int8 KV, 1K and 32K context, batch 1 and 8 (engine.benchmarks.kernels'
cases and CUDA-graph timing). Each case alternates the two variants ABAB... over the rounds and
keeps each one's median; it also checks that both give the same output bits. Needs CUDA.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402

import engine.kernels.triton_decode as td  # noqa: E402
from engine.benchmarks.kernels import make_case, time_graph  # noqa: E402

CASES = [(int8, ctx, batch) for int8 in (False, True) for ctx in (1024, 32768) for batch in (1, 8)]


class Specialized:
    """Inside: the engine's decode kernels swapped for clones with Triton's default specialization."""
    kernels = None

    def __enter__(self):
        if Specialized.kernels is None:
            Specialized.kernels = (triton.jit(td._decode_split_kernel.fn), triton.jit(td._decode_merge_kernel.fn))
        self.saved = td._decode_split_kernel, td._decode_merge_kernel
        td._decode_split_kernel, td._decode_merge_kernel = Specialized.kernels
        return self

    def __exit__(self, *exc):
        td._decode_split_kernel, td._decode_merge_kernel = self.saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_stride_specialization.py", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_stride_specialization: needs a CUDA GPU", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(0)
    rows = []
    for int8, ctx, batch in CASES:
        sets, _ = make_case(batch, ctx, int8, gen)
        cfg = td.DEFAULT_CONFIGS[int8]
        shipped = td.paged_decode_attention_triton(*sets[0], config=cfg)
        with Specialized():
            default = td.paged_decode_attention_triton(*sets[0], config=cfg)
        times = {"shipped": [], "specialized": []}
        for _ in range(args.rounds):
            times["shipped"].append(time_graph(sets, cfg) * 1e3)
            with Specialized():
                times["specialized"].append(time_graph(sets, cfg) * 1e3)
        us = {k: statistics.median(v) for k, v in times.items()}
        row = {"kv": "int8" if int8 else "bf16", "ctx": ctx, "batch": batch, "table_width": sets[0][5].shape[1],
               "shipped_us": us["shipped"], "specialized_us": us["specialized"],
               "ratio": us["specialized"] / us["shipped"], "same_bits": bool(torch.equal(shipped, default)),
               "rounds": times}
        rows.append(row)
        print(f"{row['kv']:4} {ctx:>5}x{batch}  shipped {us['shipped']:7.1f} us  specialized {us['specialized']:7.1f} us"
              f"  specialized/shipped {row['ratio']:.3f}  same bits {row['same_bits']}", flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                               "triton": triton.__version__, "rows": rows}, indent=1))
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
