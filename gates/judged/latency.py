"""TTFT parity on agent-probe positions, judged by gates.stats.judge_latency.

Positions, each measured on both engines with the same prompts, repeats alternating which engine
goes first; a position's TTFT is the median over its repeats:
- warm: a new conversation arriving at a server that has already served one;
- sibling: the next turn of a `prompt_cache_key` session (the previous turn's tokens cached);
- restored: the next turn after the session was checkpointed and the server restarted
  (needs `restart` hooks from the caller, which alone can restart a server; skipped and stated
  in the record's settings otherwise);
- fanout-1..k: k branches of one conversation sent at once, paired across engines by admission
  order (the order their first tokens came back).
Beyond the judge's time rule: cached tokens at sibling and restored must be >= the incumbent's,
and any error or timeout fails the position.

Measuring (`measure_latency`: per request its TTFT, cached tokens and error, nothing else) is
apart from judging (`judge_latency_positions`), so that measurements kept as evidence can be
judged again.
"""

from __future__ import annotations

import statistics
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from gates.stats import judge_latency

from gates.judged.client import Completion, Endpoint
from gates.judged.corpus import filler
from gates.judged.verdict import finish

Restart = Callable[[], Endpoint]


def _conversation(salt: str, words: int = 120) -> list[dict]:
    return [{"role": "user", "content": filler(words, salt) + "\nSummarise the log in one line."}]


def _next_turn(messages: list[dict], answer: str, salt: str) -> list[dict]:
    return messages + [{"role": "assistant", "content": answer},
                       {"role": "user", "content": filler(12, salt) + "\nAnd the next line?"}]


def _sibling(endpoint: Endpoint, salt: str, n: int) -> Completion:
    """A conversation's second turn on its own `prompt_cache_key` session (the first turn cached)."""
    key = f"lat-{uuid.uuid4().hex[:16]}"
    first = endpoint.chat(_conversation(salt), n, cache_key=key)
    return first if first.error else endpoint.chat(_next_turn(_conversation(salt), first.text, salt), n, cache_key=key)


def _restored(endpoint: Endpoint, restart: Restart, salt: str, n: int) -> tuple[Completion, Endpoint]:
    """The second turn after the session was checkpointed and the server restarted; returns the
    completion and the endpoint of the server that now runs."""
    key = f"lat-{uuid.uuid4().hex[:16]}"
    first = endpoint.chat(_conversation(salt), n, cache_key=key)
    if first.error:
        return first, endpoint
    try:
        endpoint.post("/v1/engine/checkpoints", {"session": key})
        endpoint = restart()
    except Exception as exc:  # a failed save or restart is this position's error, not a crash
        return Completion(error=f"{type(exc).__name__}: {exc}"), endpoint
    return endpoint.chat(_next_turn(_conversation(salt), first.text, salt), n, cache_key=key), endpoint


def _fanout(endpoint: Endpoint, stem: str, k: int, n: int) -> list[Completion]:
    """k branches of one conversation at once, in admission order (when each first token came back)."""
    with ThreadPoolExecutor(max_workers=k) as pool:
        branches = list(pool.map(lambda i: endpoint.chat(
            _conversation(stem) + [{"role": "user", "content": f"Branch {i}: the next line?"}], n), range(k)))
    branches.sort(key=lambda c: (c.first_token_at is None, c.first_token_at or 0.0))
    return branches


def _measure(given: dict[str, Endpoint], s: dict, restarts: dict[str, Restart] | None) -> dict:
    """{role: {position: [Completion per repeat]}}. Repeats alternate which engine goes first, so
    a slow spell of the host falls on both; both engines get the same prompts, unseen by either."""
    n, reps, run = s["max_tokens"], s["repeats"], uuid.uuid4().hex
    engines = dict(given)  # a restart replaces an engine's endpoint
    out: dict[str, dict[str, list[Completion]]] = {role: {} for role in engines}

    def order(r: int) -> list[str]:
        return ["incumbent", "candidate"] if r % 2 == 0 else ["candidate", "incumbent"]

    for role in order(0):
        engines[role].chat(_conversation(f"{run}-warmup"), n)
    for r in range(reps):
        for role in order(r):
            out[role].setdefault("warm", []).append(engines[role].chat(_conversation(f"{run}-warm-{r}"), n))
    for r in range(reps):
        for role in order(r):
            out[role].setdefault("sibling", []).append(_sibling(engines[role], f"{run}-sibling-{r}", n))
    if restarts is not None:
        for role in order(0):
            done, engines[role] = _restored(engines[role], restarts[role], f"{run}-restored", n)
            out[role]["restored"] = [done]
    for r in range(reps):
        for role in order(r):
            for i, c in enumerate(_fanout(engines[role], f"{run}-fanout-{r}", s["fanout"], n), start=1):
                out[role].setdefault(f"fanout-{i}", []).append(c)
    return out


def _ttft(results: list[dict]) -> float | None:
    times = [c["ttft_s"] for c in results if c["error"] is None and c["ttft_s"] is not None]
    return statistics.median(times) if len(times) == len(results) and times else None


def _plain(c: Completion) -> dict:
    return {"ttft_s": c.ttft_s, "cached_tokens": c.cached_tokens, "error": c.error}


def measure_latency(candidate: Endpoint, incumbent: Endpoint, settings: dict, *,
                    restart_candidate: Restart | None = None, restart_incumbent: Restart | None = None) -> dict:
    """Measure every position on both engines: {"positions": {role: {position: [{ttft_s, cached_tokens,
    error}]}}, "restarted": bool}."""
    restart = restart_candidate is not None and restart_incumbent is not None
    measured = _measure({"incumbent": incumbent, "candidate": candidate}, settings["latency"],
                        {"incumbent": restart_incumbent, "candidate": restart_candidate} if restart else None)
    return {"positions": {role: {p: [_plain(c) for c in done] for p, done in by_position.items()}
                          for role, by_position in measured.items()}, "restarted": restart}


def judge_latency_positions(measured: dict, settings: dict, context: dict, *, waivers: list[dict] = (),
                            candidate_ref: dict | None = None) -> dict:
    """Judge measured positions: the judged verdict-latency record."""
    s = settings["latency"]
    inc, cand = measured["positions"]["incumbent"], measured["positions"]["candidate"]
    positions = [{"id": p, "incumbent_s": _ttft(inc[p]), "candidate_s": _ttft(cand[p])} for p in inc]
    data = {"absolute_s": s["absolute_s"], "relative": s["relative"], "positions": positions}
    if candidate_ref is not None:
        data["candidate"] = candidate_ref
    record = judge_latency(data, source="latency positions")
    findings, extra = [], []
    for row in record["positions"]:
        if row["passed"] is False:
            findings.append({"case": row["id"], "measured": f"{row['candidate_s']:.4f}",
                             "what": f"TTFT over allowed {row['allowed_s']:.4f} s"})
    for p in inc:
        errors = sum(c["error"] is not None for c in cand[p]) + sum(c["error"] is not None for c in inc[p])
        if errors:
            first = next(c["error"] for c in cand[p] + inc[p] if c["error"])
            extra.append(("fail", f"position {p}: {errors} error(s) or timeout(s), first: {first}"))
            findings.append({"case": p, "measured": f"{errors} errors", "what": "errors or timeouts"})
        if p in ("sibling", "restored") and not errors:
            c_cached = min(c["cached_tokens"] for c in cand[p])
            i_cached = min(c["cached_tokens"] for c in inc[p])
            if c_cached < i_cached:
                extra.append(("fail", f"position {p}: candidate cached {c_cached} tokens, incumbent {i_cached}"))
                findings.append({"case": p, "measured": f"cached {c_cached} < {i_cached}", "what": "cached tokens"})
    cached = {p: {"candidate": min(c["cached_tokens"] for c in cand[p]),
                  "incumbent": min(c["cached_tokens"] for c in inc[p])}
              for p in inc if p in ("sibling", "restored")}
    settings_out = {**s, "positions": list(inc), "skipped": [] if measured["restarted"] else ["restored"],
                    "cached_tokens": cached}
    return finish(record, context={**context, "corpus": None}, findings=findings, extra=extra,
                  waivers=waivers, settings=settings_out)


def run_latency(candidate: Endpoint, incumbent: Endpoint, settings: dict, context: dict, *,
                waivers: list[dict] = (), candidate_ref: dict | None = None,
                restart_candidate: Restart | None = None, restart_incumbent: Restart | None = None) -> dict:
    """Measure every position on both engines and return the judged verdict-latency record."""
    measured = measure_latency(candidate, incumbent, settings, restart_candidate=restart_candidate,
                               restart_incumbent=restart_incumbent)
    return judge_latency_positions(measured, settings, context, waivers=waivers, candidate_ref=candidate_ref)
