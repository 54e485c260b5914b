"""C1 (one request at a time) decode speed and time to first token at fixed sizes."""

import statistics
import time

from context import FILLER
from wire import chat, chat_body, request, stream


def bench(a):
    base, key, model = a["base"], a["key"], a["model"]
    _, _, u1, _ = chat(base, key, model, FILLER * 1, 1)
    _, _, u3, _ = chat(base, key, model, FILLER * 3, 1)
    per_block = (u3["prompt_tokens"] - u1["prompt_tokens"]) / 2
    blocks = max(1, round((a["prompt_tokens"] - (u1["prompt_tokens"] - per_block)) / per_block))
    runs = []
    for i in range(a["runs"]):
        # A different first word per run: no run reuses another's prompt.
        text = f"Run {i}. " + FILLER * blocks + "\nCount upward from 1, separated by spaces, and never stop."
        t0 = time.monotonic()
        status, events, _ = stream(base, "/v1/chat/completions",
                                   chat_body(model, text, a["completion_tokens"], stream=True,
                                             stream_options={"include_usage": True}), key=key)
        total = time.monotonic() - t0
        content = [t for t, e in events if e != "[DONE]" and e.get("choices") and e["choices"][0]["delta"].get("content")]
        usage = next((e["usage"] for _, e in events if e != "[DONE]" and e.get("usage")), None)
        if status != 200 or not content or usage is None:
            runs.append({"status": status, "ok": False})
            continue
        n = usage["completion_tokens"]
        decode_s = content[-1] - content[0]
        runs.append({"status": status, "ok": True, "prompt_tokens": usage["prompt_tokens"], "completion_tokens": n,
                     "ttft_s": round(content[0], 4), "decode_tok_s": round((n - 1) / decode_s, 2) if decode_s > 0 and n > 1 else None,
                     "total_s": round(total, 3)})
    good = [r for r in runs if r["ok"] and r["decode_tok_s"]]
    status, st = request(base, "GET", "/v1/engine/status", key=key)
    memory = (st or {}).get("runtime", {}).get("memory", {}) if status == 200 else {}
    return {"runs": runs, "ok_runs": len(good),
            "ttft_s_median": statistics.median(r["ttft_s"] for r in good) if good else None,
            "decode_tok_s_median": statistics.median(r["decode_tok_s"] for r in good) if good else None,
            "peak_rss_bytes": memory.get("process_max_rss_bytes"),
            "device_memory": {k: memory[k] for k in ("device_total_bytes", "device_free_bytes", "torch_allocated_bytes")
                              if k in memory}}
