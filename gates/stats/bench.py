"""Benchmark: vectorised two-level bootstrap vs the plain-Python reference, measured in one run.

`python -m gates.stats.bench [--resamples 20000] [--reference-resamples 100]`
The reference runs a reduced resample count; its time is extrapolated linearly (its cost is
proportional to resamples x pairs x metrics) and the extrapolation is printed as such.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time

import numpy as np

from gates.stats.bootstrap import PairedData, block_size, resample_statistics
from gates.stats.noninferiority import judge_noninferiority
from gates.stats.reference import reference_statistics

CASES, VARIANTS, METRICS = 160, 7, 9  # 1,120 pairs


def synthetic_input(seed: int = 7) -> dict:
    rnd = random.Random(seed)
    metrics = [{"name": f"m{j}", "kind": "ratio" if j % 3 == 2 else "difference",
                "better": "lower" if j % 2 else "higher", "margin": 0.05} for j in range(METRICS)]
    pairs = []
    for c in range(CASES):
        level = [rnd.random() for _ in range(METRICS)]
        for v in range(VARIANTS):
            inc = {f"m{j}": level[j] + 1.0 + rnd.gauss(0, 0.1) for j in range(METRICS)}
            cand = {k: x + rnd.gauss(0, 0.05) for k, x in inc.items()}
            pairs.append({"case": f"case-{c}", "variant": v, "incumbent": inc, "candidate": cand})
    return {"seed": 1, "resamples": 20000, "metrics": metrics, "pairs": pairs, "determinism_passed": True}


def _paired(data: dict) -> PairedData:
    names = [m["name"] for m in data["metrics"]]
    cand = np.array([[p["candidate"][n] for n in names] for p in data["pairs"]])
    inc = np.array([[p["incumbent"][n] for n in names] for p in data["pairs"]])
    return PairedData(np.full(CASES, VARIANTS), cand, inc, np.array([m["kind"] == "ratio" for m in data["metrics"]]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gates.stats.bench")
    parser.add_argument("--resamples", type=int, default=20000)
    parser.add_argument("--reference-resamples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    data = synthetic_input()
    paired = _paired(data)

    runs = []
    for _ in range(args.repeats):  # the median of a few runs damps noise from other processes
        t0 = time.perf_counter()
        resample_statistics(paired, args.resamples, seed=1)
        runs.append(time.perf_counter() - t0)
    fast = statistics.median(runs)
    t0 = time.perf_counter()
    judge_noninferiority({**data, "resamples": args.resamples})
    whole = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference_statistics(data, args.reference_resamples, seed=1)
    ref = time.perf_counter() - t0
    ref_full = ref * args.resamples / args.reference_resamples

    print(f"input: {CASES} cases x {VARIANTS} variants = {CASES * VARIANTS} pairs, {METRICS} metrics; "
          f"block {block_size(paired.case_sizes)} resamples")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.2f}, "
          f"{platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}")
    print(f"vectorised bootstrap, {args.resamples} resamples: median {fast:.3f} s of "
          f"{', '.join(f'{t:.3f}' for t in runs)} s")
    print(f"whole judge_noninferiority (input check, grouping, bootstrap, record): {whole:.3f} s")
    print(f"plain-Python reference, {args.reference_resamples} resamples: {ref:.3f} s "
          f"-> extrapolated to {args.resamples}: {ref_full:.1f} s")
    print(f"speed-up (reference extrapolated / vectorised): {ref_full / fast:.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
