"""context: exact retrieval near the model's maximum context. One needle (a key=value line) per
prompt, at each of the lane's depths, in prompts of at least `context_tokens`; the answer's value
must equal the needle's value exactly. Records tokens, depths, exact match per depth, seconds.

Prefill is the cost on a CPU: the prompts share one haystack and are sent deepest needle first
under one prompt_cache_key, so each later prompt prefills only what follows its needle."""

from __future__ import annotations

import time

from gates.phases import PhaseFailed


def run(rt) -> dict:
    need, depths = rt.spec.setting("context_tokens"), rt.spec.setting("context_depths")
    t0 = time.monotonic()
    out = rt.probe("context", rt.http({"tokens": need, "depths": depths,
                                       "answer_tokens": rt.spec.setting("context_answer_tokens"),
                                       "timeout": rt.spec.setting("phase_timeout_s")}))
    trials = out["trials"]
    exact = sum(1 for t in trials if t["exact"])
    short = [t["depth"] for t in trials if t.get("prompt_tokens", 0) < need]
    prefilled = sum(t.get("prefilled_tokens", 0) for t in trials)
    facts = {"min_prompt_tokens": need, "depths": len(trials), "exact": exact, "trials": trials,
             "prompt_tokens_min": min((t.get("prompt_tokens", 0) for t in trials), default=0),
             "prefilled_tokens": prefilled, "cached_tokens": sum(t.get("cached_tokens", 0) for t in trials),
             "seconds": round(time.monotonic() - t0, 3)}
    if short:
        raise PhaseFailed(f"prompt(s) at depth {short} shorter than {need} tokens", facts)
    if len(trials) < 3 and rt.spec.lane_kind.name != "cpu-smoke":
        raise PhaseFailed(f"only {len(trials)} depth(s); at least 3 are required", facts)
    if exact != len(trials):
        raise PhaseFailed(f"exact retrieval at {exact} of {len(trials)} depths", facts)
    return facts
