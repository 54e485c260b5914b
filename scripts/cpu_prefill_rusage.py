"""Where each runner's long-prompt prefill spends the CPU: user time, system time and page faults.

engine.benchmarks.cpu_reference times the engine's prefill against transformers' and finds the
ratio moving between runs far more than either runner's arithmetic could (docs/perf). This
script runs the same two prefills (the same runners, prompt and thread arrangement as that
benchmark), alternating, and reads getrusage around each: user CPU seconds, system CPU seconds and
minor page faults of the whole process. Beside them it times the machine's cost of a fresh page:
touching a newly allocated 256 MiB buffer, which is what a runner pays for each large temporary
its allocator returns to the kernel and asks for again.

    .venv/bin/python scripts/cpu_prefill_rusage.py --rounds 3 --json rusage.json
"""
from __future__ import annotations

import argparse
import json
import mmap
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine.benchmarks.cpu_reference import DEFAULT_MODEL, Engine, Transformers, long_prompt  # noqa: E402

FRESH_MIB = 256


def fresh_page_cost() -> dict:
    """Seconds and minor faults to map and first-touch FRESH_MIB of new anonymous memory in
    4 KiB pages, as torch's CPU allocator gets it (numpy's own arrays would ask for huge pages)."""
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    mm = mmap.mmap(-1, FRESH_MIB << 20)
    buf = np.frombuffer(mm, dtype=np.uint8)
    buf[::4096] = 1   # one write a page: the fault is the cost, not the bandwidth
    dt, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    del buf
    mm.close()
    faults = r1.ru_minflt - r0.ru_minflt
    return {"seconds": dt, "minor_faults": faults, "us_per_fault": dt / max(faults, 1) * 1e6}


def measured(runner, ids: list[int]) -> dict:
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    out = runner.greedy(ids, 1)
    dt, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    return {"tok_s": len(ids) / dt, "wall_s": dt, "user_s": r1.ru_utime - r0.ru_utime,
            "sys_s": r1.ru_stime - r0.ru_stime, "minor_faults": r1.ru_minflt - r0.ru_minflt, "first_token": out[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--prompt-tokens", type=int, default=7400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not (Path(args.model) / "config.json").is_file():
        print(f"cpu_prefill_rusage: no model directory at {args.model} (run `make model`)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    # The benchmark's engine: room for the prompt and 64 new tokens (+ 64), its default prefill chunk.
    runners = [Engine(args.model, args.prompt_tokens + 128, None, 1), Transformers(args.model)]
    ids = long_prompt(runners[0].tokenize, args.prompt_tokens)
    for r in runners:   # warm-up: first calls pay one-time costs neither runner pays again
        r.greedy(ids[:64], 1)
    report = {"prompt_tokens": len(ids), "rounds": []}
    try:
        for i in range(args.rounds):
            order = runners if i % 2 == 0 else runners[::-1]
            row = {"fresh_pages": fresh_page_cost()}
            for r in order:
                row[r.name] = measured(r, ids)
            report["rounds"].append(row)
            fp = row["fresh_pages"]
            print(f"round {i + 1}: fresh page {fp['us_per_fault']:.2f} us", flush=True)
            for r in runners:
                m = row[r.name]
                print(f"  {r.name:12} {m['tok_s']:6.1f} tok/s  wall {m['wall_s']:6.2f} s  user {m['user_s']:6.2f} s  "
                      f"sys {m['sys_s']:6.2f} s  minor faults {m['minor_faults']:>9,}", flush=True)
    finally:
        for r in runners:
            r.close()
    same = {row["engine"]["first_token"] == row["transformers"]["first_token"] for row in report["rounds"]}
    report["first_token_identical"] = same == {True}
    med = {name: {k: statistics.median(row[name][k] for row in report["rounds"])
                  for k in ("tok_s", "wall_s", "user_s", "sys_s", "minor_faults")} for name in ("engine", "transformers")}
    report["median"] = med
    print(f"\nmedians over {args.rounds} rounds (first generated token identical: {report['first_token_identical']})")
    print(f"{'runner':12} {'tok/s':>7} {'wall s':>7} {'user s':>7} {'sys s':>7} {'minor faults':>13}")
    for name, m in med.items():
        print(f"{name:12} {m['tok_s']:7.1f} {m['wall_s']:7.2f} {m['user_s']:7.2f} {m['sys_s']:7.2f} {m['minor_faults']:13,.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
