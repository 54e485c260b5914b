"""The CPU decode step of the reference model at two commits of engine/, side by side in one run.

Each commit's engine/ is exported (`git archive`) to a temporary directory. Every round starts
one process per commit, alternating which goes first, and each process loads the model, holds
one sequence of --context tokens of KV (scripts/bench_cpu_decode_step.py's setup) and times
--steps batch-1 decode steps after three untimed ones. Separate processes, so that neither
commit's modules, allocations or OpenMP pool run inside the other's; rounds alternate, so that
a slow spell of the machine falls on both. Prints each commit's median ms a step, its rounds,
and A's time over B's, and whether the two gave the same logits bit for bit.

    .venv/bin/python scripts/ab_cpu_decode_step.py --a main --b next/cpu-decode-dispatch [--rounds 8]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run in the child with the exported engine first on sys.path; prints one JSON line.
CHILD = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])
import torch
import engine
from bench_cpu_decode_step import one_sequence
llm, seq = one_sequence(sys.argv[3], int(sys.argv[4]))
steps = int(sys.argv[5])
with torch.inference_mode():
    logits = llm.runner.decode([seq])
    for _ in range(2):
        llm.runner.decode([seq])
    t = time.perf_counter()
    for _ in range(steps):
        llm.runner.decode([seq])
    ms = (time.perf_counter() - t) / steps * 1e3
print(json.dumps({"ms": ms, "engine": engine.__file__, "flat_loop": llm.runner.cpu_decode is not None,
                  "logits": hashlib.sha256(logits.float().contiguous().numpy().tobytes()).hexdigest()}))
"""


def resolve(rev: str) -> str | None:
    """The commit `rev` names in this repository, or None."""
    got = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)
    return got.stdout.strip() if got.returncode == 0 else None


def export(sha: str, dest: Path) -> Path:
    """engine/ of commit `sha` under dest / its first 12 digits."""
    out = dest / sha[:12]
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", sha, "engine"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def run_child(tree: Path, args) -> dict:
    env = dict(os.environ, PYTHONPATH="")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(REPO / "scripts"), args.model,
                           str(args.context), str(args.steps)],
                          capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"the step of {tree.name} failed:\n{proc.stderr[-2000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if not got["engine"].startswith(str(tree)):
        sys.exit(f"{tree.name}: imported {got['engine']}, not the exported tree")
    if not got["flat_loop"]:
        sys.exit(f"{tree.name}: the flat CPU decode loop does not run")
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/ab_cpu_decode_step.py", description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="a git revision (the baseline)")
    ap.add_argument("--b", required=True, help="a git revision (the candidate)")
    ap.add_argument("--model", default=str(REPO / ".assay/models/smollm2-135m-instruct"))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    if not (Path(args.model) / "config.json").is_file():
        ap.error(f"no model directory at {args.model} (run `make model`)")
    shas = {side: resolve(getattr(args, side)) for side in ("a", "b")}
    for side, sha in shas.items():
        if sha is None:
            ap.error(f"--{side} {getattr(args, side)!r} names no commit in this repository")
    if args.rounds < 1 or args.steps < 1 or args.context < 2:
        ap.error("--rounds and --steps must be at least 1, --context at least 2")
    with tempfile.TemporaryDirectory(prefix="ab-cpu-step-") as tmp:
        trees = {side: export(sha, Path(tmp) / side) for side, sha in shas.items()}
        ms: dict[str, list[float]] = {"a": [], "b": []}
        logits: dict[str, list[str]] = {"a": [], "b": []}
        for r in range(args.rounds):
            for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
                got = run_child(trees[side], args)
                ms[side].append(got["ms"])
                logits[side].append(got["logits"][:16])
            print(f"round {r + 1}/{args.rounds}: a {ms['a'][-1]:.2f} ms, b {ms['b'][-1]:.2f} ms", flush=True)
        names = {side: f"{getattr(args, side)} ({trees[side].name})" for side in trees}
    med = {side: statistics.median(v) for side, v in ms.items()}
    for side in ("a", "b"):
        print(f"{side}: {names[side]:40s} {med[side]:7.2f} ms a step (rounds {min(ms[side]):.2f}-{max(ms[side]):.2f})")
    ratios = sorted(a / b for a, b in zip(ms["a"], ms["b"]))
    # Processes running the same code can give other bits: on main as of 2026-12-05, a few in a
    # hundred built a wrong RoPE cos table (scripts/probe_rope_table.py). So what is reported is
    # how many distinct first-step logits each side gave and whether the sides gave any in common.
    distinct = {side: set(v) for side, v in logits.items()}
    same = bool(distinct["a"] & distinct["b"])
    print(f"first-step logits: a gave {len(distinct['a'])} distinct, b {len(distinct['b'])}; "
          f"{'some bit for bit the same at a and b' if same else 'none the same at a and b'}")
    print(f"a / b: {med['a'] / med['b']:.3f} by medians (round by round {ratios[0]:.3f}-{ratios[-1]:.3f}, "
          f"median {statistics.median(ratios):.3f}); above 1 means b is faster")
    if args.json:
        Path(args.json).write_text(json.dumps({"revisions": names, "ms": ms, "median_ms": med,
                                               "context": args.context, "steps": args.steps,
                                               "logits_sha256_16": logits, "same_logits": same}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
