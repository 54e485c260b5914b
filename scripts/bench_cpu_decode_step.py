"""One CPU decode step of the reference model: the flat loop (engine.runtime.cpu_decode) against
the model's module path, alternating in one process, and the step's products alone.

Both paths run the same batch-1 step (one sequence holding --context tokens of KV) from the
same caches; each round times --steps steps of one path, then of the other, swapping which goes
first. "products alone" is every projection of the step (F.linear over the model's own weights)
without anything between them: the floor that the weights' bytes set. Prints medians in ms and
the module path over the flat loop.

    .venv/bin/python scripts/bench_cpu_decode_step.py [--rounds 12] [--steps 15] [--context 200]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engine.runtime.llm import LLM  # noqa: E402
from engine.runtime.sampling import SamplingParams  # noqa: E402
from engine.runtime.sequence import Sequence  # noqa: E402


def one_sequence(model_dir: str, context: int) -> tuple[LLM, Sequence]:
    """A float32 CPU engine whose flat loop runs, and one sequence in its pool holding `context`
    tokens of KV, ready for runner.decode([seq]) (which rewrites its last position each time)."""
    # Loaded on a thread that ends (the engine's own rule), then stepped by the caller: its
    # thread is the only one with an OpenMP pool (engine.runtime.cpu_threads).
    llm = LLM(model_dir, dtype="float32", kv_dtype="float32", device="cpu", max_concurrency=1,
              kv_capacity_tokens=context + 64, max_model_len=context + 32)
    if llm.runner.cpu_decode is None:
        sys.exit("the flat loop does not run here (not the CPU reference ops over float caches)")
    seq = Sequence(list(range(context)), SamplingParams(max_new_tokens=8, ignore_eos=True), None, 1)
    if not llm.scheduler._reserve(seq):
        sys.exit("KV pool too small")
    seq.kv_len = context - 1
    return llm, seq


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench_cpu_decode_step.py")
    ap.add_argument("--model", default=".assay/models/smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    llm, seq = one_sequence(args.model, args.context)
    runner = llm.runner
    flat_loop = runner.cpu_decode
    model = llm.model
    weights = [p.weight for layer in model.layers
               for p in (layer.attn.qkv, layer.attn.o, layer.mlp.gate_up, layer.mlp.down)] + [model.lm_head.weight]
    inputs = {w.shape[1]: torch.randn(1, w.shape[1]) for w in weights}

    def products():
        for w in weights:
            F.linear(inputs[w.shape[1]], w)

    def step(path):
        runner.cpu_decode = path
        runner.decode([seq])

    runs = {"flat loop": lambda: step(flat_loop), "module path": lambda: step(None), "products alone": products}
    ms = {name: [] for name in runs}
    with torch.inference_mode():
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for name in order:
                for _ in range(3):
                    runs[name]()
                t = time.perf_counter()
                for _ in range(args.steps):
                    runs[name]()
                ms[name].append((time.perf_counter() - t) / args.steps * 1e3)
    runner.cpu_decode = flat_loop
    med = {name: statistics.median(v) for name, v in ms.items()}
    for name, v in ms.items():
        print(f"{name:15s} {med[name]:7.2f} ms  (rounds {min(v):.2f}-{max(v):.2f})")
    print(f"module path / flat loop: {med['module path'] / med['flat loop']:.3f}; "
          f"outside the products: module path {med['module path'] - med['products alone']:.2f} ms, "
          f"flat loop {med['flat loop'] - med['products alone']:.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"ms": ms, "median_ms": med, "context": args.context,
                                               "threads": torch.get_num_threads()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
