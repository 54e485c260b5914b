"""`python -m engine.benchmarks.spec_reference`: n-gram speculation against plain decoding on the
reference model, on input-grounded prompts (edits and refactors of a given text, where the answer
copies long runs of its input), side by side in one run.

Two engines on the same weights — `spec="none"` and `spec="ngram"` — decode each prompt greedily at
batch 1, alternating which goes first each round. The table gives per-prompt decode tok/s of both,
their ratio, whether the token ids are identical (they must be: greedy verification accepts only
what the target would have produced), and the acceptance rate at each draft position.

    python -m engine.benchmarks.spec_reference --model /path/to/smollm2-135m-instruct [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import torch

from engine.model.chat import render_chat
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams

CODE = '''def total_price(items, tax):
    t = 0
    for i in items:
        t = t + i["price"] * i["qty"]
    t = t + t * tax
    return t


def cheapest(items):
    c = None
    for i in items:
        if c is None or i["price"] < c["price"]:
            c = i
    return c


def names(items):
    out = []
    for i in items:
        out.append(i["name"].strip().lower())
    return out
'''

TEXT = ("The lighthouse stood on the northern cliff for two hundred years. Every night the keeper climbed "
        "the one hundred and twelve steps, trimmed the wick, polished the great lens and wrote the weather "
        "in a leather book. Ships passing the point saw the beam sweep the water every twelve seconds, and "
        "sailors said the light had never once failed. When the keeper grew old, his daughter took the "
        "stairs instead, and she kept the same book in the same careful hand.")

PROMPTS = {
    "refactor-rename": f"Rewrite this Python code, renaming the loop variable `i` to `item` everywhere. "
                       f"Output only the code.\n\n{CODE}",
    "refactor-comments": f"Add a one-line docstring to each function of this code and output the whole code.\n\n{CODE}",
    "edit-tense": f"Rewrite this paragraph in the present tense, changing nothing else:\n\n{TEXT}",
    "edit-names": f"Copy this paragraph exactly, but replace 'keeper' with 'warden':\n\n{TEXT}",
    "quote-lines": f"Repeat the following text word for word:\n\n{TEXT}",
    "summary": f"Summarize this paragraph in two sentences:\n\n{TEXT}",
}


def run_one(llm: LLM, ids: list[int], n: int) -> tuple[float, list[int], dict]:
    params = SamplingParams(max_new_tokens=n, temperature=0.0)
    if llm.device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = llm.generate(ids, params, timeout=600)
    if llm.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out.token_ids, out.stats.get("spec", {})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.benchmarks.spec_reference", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the reference model directory")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--draft-tokens", type=int, default=7)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)

    kw = dict(device=args.device, max_concurrency=1, max_model_len=4096, kv_capacity_tokens=8192)
    engines = {"plain": LLM(args.model, spec="none", **kw),
               "ngram": LLM(args.model, spec="ngram", draft_tokens=args.draft_tokens, **kw)}
    enc = engines["plain"].tokenizer.encode
    prompts = {name: enc(render_chat(args.model, [{"role": "user", "content": text}])) for name, text in PROMPTS.items()}
    for llm in engines.values():                              # warm-up: graphs, allocations
        run_one(llm, prompts["summary"], 16)
    rows = {}
    for name, ids in prompts.items():
        times = {"plain": [], "ngram": []}
        tokens, accepted, attempted = {}, None, None
        for r in range(args.rounds):
            for which in (("plain", "ngram") if r % 2 == 0 else ("ngram", "plain")):
                seconds, out, spec = run_one(engines[which], ids, args.new_tokens)
                times[which].append(len(out) / seconds)
                tokens.setdefault(which, out)
                if which == "ngram" and spec:
                    attempted = [a + b for a, b in zip(attempted or [0] * len(spec["attempted"]), spec["attempted"])]
                    accepted = [a + b for a, b in zip(accepted or [0] * len(spec["accepted"]), spec["accepted"])]
        plain, ngram = statistics.median(times["plain"]), statistics.median(times["ngram"])
        rows[name] = {"prompt_tokens": len(ids), "new_tokens": len(tokens["plain"]), "plain_tok_s": round(plain, 1),
                      "ngram_tok_s": round(ngram, 1), "ratio": round(ngram / plain, 3),
                      "identical": tokens["plain"] == tokens["ngram"],
                      "acceptance_by_position": [round(a / t, 3) if t else None for a, t in zip(accepted or [], attempted or [])]}
    for llm in engines.values():
        llm.stop()
    grounded = [r["ratio"] for n, r in rows.items() if n != "summary"]
    report = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor(),
              "torch": torch.__version__, "new_tokens": args.new_tokens, "rounds": args.rounds,
              "draft_tokens": args.draft_tokens, "rows": rows,
              "input_grounded_geomean_ratio": round(statistics.geometric_mean(grounded), 3),
              "all_identical": all(r["identical"] for r in rows.values())}
    print(f"{'prompt':<18} {'tokens':>6} {'plain':>8} {'ngram':>8} {'ratio':>6} identical  acceptance by draft position")
    for name, r in rows.items():
        print(f"{name:<18} {r['new_tokens']:>6} {r['plain_tok_s']:>8} {r['ngram_tok_s']:>8} {r['ratio']:>6} "
              f"{str(r['identical']):<9}  {r['acceptance_by_position']}")
    print(f"input-grounded geometric-mean ratio: {report['input_grounded_geomean_ratio']}; "
          f"all identical: {report['all_identical']}; device: {report['device']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
