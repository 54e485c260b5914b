"""Exact retrieval near the model's maximum context: one needle (a key and its value) per prompt,
at several depths of one haystack. The prompts are sent deepest needle first under one
prompt_cache_key, so each later prompt reuses the haystack before its own needle and only the
part after the needle is prefilled again."""

import hashlib
import math
import random
import re
import time

from wire import chat

FILLER = ("The quarterly report lists routine maintenance of the cooling loops, the rotation of "
          "night shifts, and the inventory of spare parts kept in the east storage room. ")
KEY = "vault_code"


def prompt_for(blocks, depth, key, value):
    """One needle line, `The secret <key> is <value>.` (a key and its value), at `depth` of a
    haystack of filler blocks, then the question. The same key in every prompt, so the prompts
    share everything up to their needle. Why this wording and not a bare `key=value` line:
    docs/LANES.md (context)."""
    parts = [FILLER] * blocks
    parts.insert(int(round(blocks * depth)), f"\nThe secret {key} is {value}.\n")
    return "".join(parts) + f"\nWhat is the secret {key}? Answer with the six digits only."


def answer_value(text):
    """The value the model gave: what follows the last '=' or ' is ', without surrounding
    quotes, spaces or a final full stop. Compared for equality, never as a substring."""
    value = text.strip()
    for sep in ("=", " is "):
        if sep in value:
            value = value.rsplit(sep, 1)[1]
    return value.strip().strip("`'\"*").rstrip(".").strip()


def context(a):
    base, key, model = a["base"], a["key"], a["model"]
    # Tokens per filler block, measured on the engine itself (its tokenizer is not ours to import).
    _, _, u2, _ = chat(base, key, model, prompt_for(2, 0.5, KEY, "000000"), 1)
    _, _, u6, _ = chat(base, key, model, prompt_for(6, 0.5, KEY, "000000"), 1)
    per_block = (u6["prompt_tokens"] - u2["prompt_tokens"]) / 4
    overhead = u2["prompt_tokens"] - 2 * per_block
    blocks = math.ceil((a["tokens"] - overhead) / per_block) + 1
    rng = random.Random(a.get("seed", 7))
    trials = []
    for i, depth in enumerate(sorted(a["depths"], reverse=True)):
        needle_key, value = KEY, f"{rng.randrange(10**6):06d}"
        t0 = time.monotonic()
        status, text, usage, code = chat(base, key, model, prompt_for(blocks, depth, needle_key, value),
                                         a["answer_tokens"], timeout=a.get("timeout", 1800),
                                         prompt_cache_key="context-haystack")
        seconds = time.monotonic() - t0
        if status != 200:
            trials.append({"depth": depth, "status": status, "code": code, "exact": False})
            continue
        given = answer_value(text)
        new = usage["prompt_tokens"] - usage["prompt_tokens_details"]["cached_tokens"]
        trials.append({"depth": depth, "status": status, "prompt_tokens": usage["prompt_tokens"],
                       "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"], "prefilled_tokens": new,
                       "completion_tokens": usage["completion_tokens"], "exact": given == value,
                       "answer_sha256": hashlib.sha256(text.encode()).hexdigest(),
                       "answer_digits_only": bool(re.fullmatch(r"[0-9]{6}", given)),
                       "seconds": round(seconds, 3), "prefill_tok_s": round(new / seconds, 1) if seconds else None})
    return {"blocks": blocks, "tokens_per_block": per_block, "trials": trials}
