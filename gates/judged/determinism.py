"""Determinism: the same prompts twice on the candidate, identical output digests required.

The issue asks for a fresh server each time: the caller passes `restart`, a function that
restarts the candidate server and returns its endpoint (the lane does); without one both runs go
to the same server, which the record states in its settings (`fresh_server: false`).

Measuring (`measure_determinism`: plain JSON, digests only) is apart from judging
(`judge_determinism_runs`), so that measurements kept as evidence can be judged again.
"""

from __future__ import annotations

from typing import Callable

from gates.stats import judge_determinism

from gates.judged.client import Endpoint
from gates.judged.corpus import QUALITY, corpus_sha256, determinism_prompts, membership
from gates.judged.verdict import finish


def measure_determinism(candidate: Endpoint, settings: dict, *,
                        restart: Callable[[], Endpoint] | None = None) -> dict:
    """Run N prompts twice: {"runs": [[{prompt, output_sha256}]], "errors": [...], "fresh_server": bool}."""
    s = settings["determinism"]
    runs, errors = [], []
    endpoint = candidate
    for run in range(2):
        if run and restart is not None:
            endpoint = restart()
        outputs = []
        for ident, messages in determinism_prompts(s["prompts"]):
            done = endpoint.chat(messages, s["max_tokens"])
            if done.error:
                errors.append(f"run {run} prompt {ident}: {done.error}")
                continue
            outputs.append({"prompt": ident, "output_sha256": done.output_sha256})
        runs.append(outputs)
    return {"runs": runs, "errors": errors, "fresh_server": restart is not None}


def judge_determinism_runs(measured: dict, settings: dict, context: dict, *, waivers: list[dict] = (),
                           candidate_ref: dict | None = None) -> dict:
    """Judge measured runs: the judged verdict-determinism record."""
    s = settings["determinism"]
    prompts = determinism_prompts(s["prompts"])
    data = {"runs": measured["runs"], "min_prompts": s["prompts"]}
    if candidate_ref is not None:
        data["candidate"] = candidate_ref
    record = judge_determinism(data, source="determinism runs")
    first = record["first_difference"]
    findings = []
    if first is not None:
        findings.append({"case": first["prompt"], "measured": f"{first['sha256'][0][:16]} != {first['sha256'][1][:16]}",
                         "what": f"run {first['run']} output differs from run 0"})
    elif record["verdict"] == "inconclusive":
        findings += [{"case": "runs", "measured": r, "what": "inconclusive"} for r in record["reasons"]]
    corpus = {"name": QUALITY.name, "sha256": corpus_sha256(QUALITY), "items": len(prompts),
              "membership_sha256": membership(prompts)}
    return finish(record, context={**context, "corpus": corpus}, findings=findings,
                  extra=[("inconclusive", e) for e in measured["errors"]], waivers=waivers,
                  settings={**s, "fresh_server": measured["fresh_server"]})


def run_determinism(candidate: Endpoint, settings: dict, context: dict, *, waivers: list[dict] = (),
                    candidate_ref: dict | None = None,
                    restart: Callable[[], Endpoint] | None = None) -> dict:
    """Run N prompts twice and return the judged verdict-determinism record."""
    return judge_determinism_runs(measure_determinism(candidate, settings, restart=restart), settings, context,
                                  waivers=waivers, candidate_ref=candidate_ref)
