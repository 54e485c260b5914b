"""`python -m engine generate`: one prompt through the engine, text or JSON out.

On the CPU every dtype runs through the torch path; bf16 KV there is allowed (slow, exact to
the bf16 rounding of K and V)."""
from __future__ import annotations

import argparse
import json
import sys

from engine.errors import EngineError
from engine.runtime.sampling import SamplingParams


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model directory (config.json, *.safetensors, tokenizer.json)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-ids", help="comma-separated token ids, e.g. 1,2,3")
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--kv-dtype", choices=["auto", "bf16", "int8", "float32"], default="auto")
    p.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    p.add_argument("--spec", choices=["none", "ngram"], default="none")
    p.add_argument("--draft-tokens", type=int, default=7)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--kernels", help="AOT kernels artifact (a build's *-kernels.tar; default: "
                   "$ENGINE_KERNELS_ARTIFACT; none: Triton compiles just in time)")
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-new-tokens tokens")
    p.add_argument("--json", action="store_true", help="print token ids, text and stats as JSON")
    p.add_argument("--chat", action="store_true",
                   help="send --prompt as a user message through the model's chat template; stop at end of turn")


def parse_ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--prompt-ids must be comma-separated integers, got {text!r}") from None


def main(args: argparse.Namespace) -> int:
    from engine.kernels.aot import KernelsUnavailable, status, use
    from engine.runtime.llm import LLM
    try:
        use(getattr(args, "kernels", None))
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                top_p=args.top_p, seed=args.seed, ignore_eos=args.ignore_eos)
        llm = LLM(args.model, dtype=args.dtype, kv_dtype=args.kv_dtype, device=args.device,
                  spec=args.spec, draft_tokens=args.draft_tokens, max_concurrency=1)
        ids = parse_ids(args.prompt_ids) if args.prompt_ids is not None else llm.tokenizer.encode(args.prompt)
        if args.chat:  # engine/model/chat.py: the model's own template and its end-of-turn tokens
            from engine.model.chat import end_of_turn_ids, render_chat
            if args.prompt is None:
                raise ValueError("--chat needs --prompt (the user message), not --prompt-ids")
            ids = llm.tokenizer.encode(render_chat(args.model, [{"role": "user", "content": args.prompt}]))
            params.stop_token_ids = sorted(set(params.stop_token_ids or ()) | end_of_turn_ids(args.model))
        try:
            res = llm.generate(ids, params)
        finally:
            llm.stop()
    except (EngineError, ValueError, KernelsUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = llm.tokenizer.decode_text(res.token_ids)
    if args.json:
        s = res.stats
        out = {"token_ids": res.token_ids, "text": text, "finish_reason": res.finish_reason,
               "stats": {"prompt_tokens": res.prompt_tokens, "generated_tokens": len(res.token_ids),
                         "prefill_tok_s": s["prefill_tok_s"], "decode_tok_s": s["decode_tok_s"],
                         "spec": s["spec"]}, "kernels": status()}
        print(json.dumps(out, sort_keys=True))
    else:
        print(text)
    return 0
