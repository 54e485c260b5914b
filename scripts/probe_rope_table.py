"""How often a fresh process builds a wrong RoPE table, at one or more commits of engine/.

Each process loads the reference model the way the engine does on the CPU (engine.model.weights
.load_model on a thread that ends, engine.runtime.cpu_threads) and compares its cos and sin
tables with float64 cos and sin of the same float32 angles. A table more than 1e-6 off is wrong:
float32's own rounding is 6e-8 here. The commits' processes alternate, so a busy spell of the
machine falls on all of them. Prints, per commit, how many processes built a wrong cos or sin
table, the worst error seen and how many distinct tables came out.

    .venv/bin/python scripts/probe_rope_table.py --revs main next/rope-table-vml [--processes 40]
    python3 scripts/probe_rope_table.py --model DIR      # this checkout's engine/, no git needed
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_cpu_decode_step import export, resolve  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WRONG = 1e-6

CHILD = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import torch
import engine
from engine.model.rope import inv_frequencies
from engine.model.weights import load_model
from engine.runtime.cpu_threads import on_fresh_thread

cfg, model = on_fresh_thread(load_model, sys.argv[2], torch.float32, torch.device("cpu"), int(sys.argv[3]))
pos = torch.arange(model.rope_cos.shape[0], dtype=torch.float32)
angles = torch.outer(pos, inv_frequencies(cfg)).repeat(1, 2).double()
err = {name: float((table.double() - ref).abs().max())
       for name, table, ref in (("cos", model.rope_cos, angles.cos()), ("sin", model.rope_sin, angles.sin()))}
print(json.dumps({"engine": engine.__file__, "err": err,
                  "sha": hashlib.sha256(model.rope_cos.numpy().tobytes() + model.rope_sin.numpy().tobytes()).hexdigest()[:16]}))
"""


def one(tree: Path, args) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), args.model, str(args.positions)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""), cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"a process of {tree.name} failed:\n{proc.stderr[-2000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if not got["engine"].startswith(str(tree)):
        sys.exit(f"{tree.name}: imported {got['engine']}, not the exported tree")
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/probe_rope_table.py", description=__doc__.splitlines()[0])
    ap.add_argument("--revs", nargs="+", help="git revisions whose engine/ to probe (default: this checkout's)")
    ap.add_argument("--model", default=str(REPO / ".assay/models/smollm2-135m-instruct"))
    ap.add_argument("--processes", type=int, default=40, help="processes per revision")
    ap.add_argument("--positions", type=int, default=232, help="rows of the table (the model's max_positions)")
    ap.add_argument("--json", help="also write every process's figures here")
    args = ap.parse_args(argv)
    if not (Path(args.model) / "config.json").is_file():
        ap.error(f"no model directory at {args.model} (run `make model`)")
    if args.processes < 1 or args.positions < 1:
        ap.error("--processes and --positions must be at least 1")
    if args.revs:
        shas = {rev: resolve(rev) for rev in args.revs}
        for rev, sha in shas.items():
            if sha is None:
                ap.error(f"--revs: {rev!r} names no commit in this repository")
    else:               # the engine/ of this checkout, as it is (a copy without git works too)
        args.revs, shas = ["this checkout"], {"this checkout": "working tree"}
    runs: dict[str, list[dict]] = {rev: [] for rev in args.revs}
    with tempfile.TemporaryDirectory(prefix="probe-rope-") as tmp:
        trees = {rev: REPO if sha == "working tree" else export(sha, Path(tmp) / str(i))
                 for i, (rev, sha) in enumerate(shas.items())}
        for i in range(args.processes):
            order = args.revs if i % 2 == 0 else list(reversed(args.revs))
            for rev in order:
                runs[rev].append(one(trees[rev], args))
            wrong = {rev: sum(max(r["err"].values()) > WRONG for r in runs[rev]) for rev in args.revs}
            print(f"{i + 1}/{args.processes}: wrong so far " + ", ".join(f"{rev} {n}" for rev, n in wrong.items()),
                  flush=True)
    for rev in args.revs:
        rs = runs[rev]
        bad = {name: sum(r["err"][name] > WRONG for r in rs) for name in ("cos", "sin")}
        worst = max(max(r["err"].values()) for r in rs)
        print(f"{rev} ({shas[rev][:12]}): {len(rs)} process{'es' if len(rs) != 1 else ''}; wrong cos table {bad['cos']}, wrong sin table "
              f"{bad['sin']}; worst error {worst:.2e}; {len({r['sha'] for r in rs})} distinct table(s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"revisions": {rev: shas[rev] for rev in args.revs},
                                               "positions": args.positions, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
