"""C1 (one request at a time) decode speed and time to first token at fixed sizes.

A streamed chat reply carries only the tokens that have text: a token that ends inside a UTF-8
character, or one that decodes to nothing, sends no chunk, so the first text chunk may come
several tokens after the first token. Decode speed therefore does not come from the text chunks'
times: each run streams requests of the same prompt size, `completion_tokens` long and `SHORT`
tokens long, and divides the difference of their token counts by the difference of their times
to the end of the stream; the prefill and any tokens without text cancel out.

On a small model that difference is a few milliseconds, the size of one scheduling hiccup on a
busy host, so one pair can come out negative. Each run therefore streams `repeats` long and
`repeats` short requests, interleaved, and takes the fastest of each: interference only ever adds
time, so the minimum is the estimate it disturbs least (the practice `timeit` documents). Every
stream's time is kept in the run's record. `ttft_s` is the median time to the long requests'
first text chunk, what a client waits to see text.
"""

import statistics
import time

from context import FILLER
from wire import chat, chat_body, request, stream

SHORT = 8        # the short request's completion tokens (fewer when completion_tokens is small)


def _streamed(base, key, model, text, max_tokens):
    """(ok, {prompt_tokens, completion_tokens, ttft_s, total_s}) of one streamed request."""
    t0 = time.monotonic()
    status, events, _ = stream(base, "/v1/chat/completions",
                               chat_body(model, text, max_tokens, stream=True, stream_options={"include_usage": True}),
                               key=key)
    total = time.monotonic() - t0
    content = [t for t, e in events if e != "[DONE]" and e.get("choices") and e["choices"][0]["delta"].get("content")]
    usage = next((e["usage"] for _, e in events if e != "[DONE]" and e.get("usage")), None)
    if status != 200 or not content or usage is None:
        return False, {"status": status}
    return True, {"status": status, "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                  "ttft_s": round(content[0], 4), "total_s": round(total, 4)}


def _fastest_full(streams):
    """The fastest of the streams that ran to the most tokens: a prompt whose reply stopped early
    (an end-of-text token) took less time for less work and is not comparable with its repeats."""
    most = max(r["completion_tokens"] for r in streams)
    return min((r for r in streams if r["completion_tokens"] == most), key=lambda r: r["total_s"])


def bench(a):
    base, key, model = a["base"], a["key"], a["model"]
    _, _, u1, _ = chat(base, key, model, FILLER * 1, 1)
    _, _, u3, _ = chat(base, key, model, FILLER * 3, 1)
    per_block = (u3["prompt_tokens"] - u1["prompt_tokens"]) / 2
    blocks = max(1, round((a["prompt_tokens"] - (u1["prompt_tokens"] - per_block)) / per_block))
    short = max(1, min(SHORT, a["completion_tokens"] // 4))
    repeats = a.get("repeats", 1)
    runs = []
    for i in range(a["runs"]):
        longs, shorts = [], []
        for j in range(repeats):
            # A different first word per request: no request reuses another's prompt.
            texts = [f"Run {i}{s}{j}. " + FILLER * blocks + "\nCount upward from 1, separated by spaces, and never stop."
                     for s in ("a", "b")]
            longs.append(_streamed(base, key, model, texts[0], a["completion_tokens"]))
            shorts.append(_streamed(base, key, model, texts[1], short))
        failed = [r["status"] for ok, r in longs + shorts if not ok]
        if failed:
            runs.append({"ok": False, "statuses": failed})
            continue
        longs, shorts = [r for _, r in longs], [r for _, r in shorts]
        fast, fast_short = _fastest_full(longs), _fastest_full(shorts)
        dn = fast["completion_tokens"] - fast_short["completion_tokens"]
        dt = fast["total_s"] - fast_short["total_s"]
        runs.append({"ok": True, "status": fast["status"], "prompt_tokens": fast["prompt_tokens"],
                     "completion_tokens": fast["completion_tokens"], "total_s": fast["total_s"],
                     "ttft_s": statistics.median(r["ttft_s"] for r in longs),
                     "short": {"completion_tokens": fast_short["completion_tokens"], "total_s": fast_short["total_s"]},
                     "streams": [[r["completion_tokens"], r["total_s"]] for r in longs],
                     "short_streams": [[r["completion_tokens"], r["total_s"]] for r in shorts],
                     "decode_tok_s": round(dn / dt, 2) if dn > 0 and dt > 0 else None})
    good = [r for r in runs if r["ok"] and r["decode_tok_s"]]
    status, st = request(base, "GET", "/v1/engine/status", key=key)
    runtime = (st or {}).get("runtime", {}) if status == 200 else {}
    memory = runtime.get("memory", {})
    return {"runs": runs, "ok_runs": len(good), "method": f"{repeats} streams of {a['completion_tokens']} and {repeats} of {short} "
                                                          "tokens a run: token difference over the fastest "
                                                          "end-time difference",
            "ttft_s_median": statistics.median(r["ttft_s"] for r in good) if good else None,
            "decode_tok_s_median": statistics.median(r["decode_tok_s"] for r in good) if good else None,
            "peak_rss_bytes": memory.get("process_max_rss_bytes"),
            "decode": (st or {}).get("decode") if status == 200 else None,
            "device_memory": {k: memory[k] for k in ("device_total_bytes", "device_free_bytes", "torch_allocated_bytes")
                              if k in memory}}
