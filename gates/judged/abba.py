"""ABBA speed gate: legs A1 B1 B2 A2 of every case on one host, judged by gates.stats.judge_abba.

A is the incumbent, B the candidate. Each leg runs every case on its engine; a deep-cache case
first primes a `prompt_cache_key` session with its context, then measures a request that extends
it (the server reports the reused tokens). A leg's rate is the tokens decoded after the first
over the time between the first and the last streamed token, so prefill is not in it. With
`repeats` > 1 (the CPU size) a leg runs each case that many times, each on a fresh session, and
keeps the fastest run: on a shared CPU another process only ever adds time to a run, never takes
it away, so the fastest of a few is the steadiest estimate of what the engine itself needs (the
minimum estimator of `timeit`); the repeats must give the same output. The
judge's spread rule decides whether the legs agree well enough to say anything; the weighted
ratio it reports is then held to the lane's `min_ratio` here (the judge only reports it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from gates.stats import judge_abba

from gates.judged.client import Endpoint
from gates.judged.corpus import ABBA, abba_cases, corpus_sha256, filler, membership
from gates.judged.verdict import finish

LEGS = (("A1", "incumbent"), ("B1", "candidate"), ("B2", "candidate"), ("A2", "incumbent"))


def _messages(case: dict, question: bool) -> list[dict]:
    context = filler(case["cached_words"], case["id"] + ":context") if case["cached_words"] else ""
    ask = filler(case["prompt_words"], case["id"] + ":prompt")
    if not question:
        return [{"role": "user", "content": context}]
    return [{"role": "user", "content": (context + "\n\n" if context else "") + ask
             + "\nContinue the inspection log."}]


def _leg(endpoint: Endpoint, case: dict, nonce: str) -> tuple[dict | None, str | None]:
    key = None
    if case["cached_words"]:
        key = f"abba-{nonce}-{case['id']}"
        primed = endpoint.chat(_messages(case, False), 1, cache_key=key)
        if primed.error:
            return None, f"priming failed: {primed.error}"
    done = endpoint.chat(_messages(case, True), case["decode_tokens"], cache_key=key)
    if done.error:
        return None, done.error
    if done.completion_tokens < 2 or not done.decode_s:
        return None, f"{done.completion_tokens} token(s) decoded; a rate needs at least 2"
    return {"tokens": done.completion_tokens - 1, "seconds": done.decode_s,
            "output_sha256": done.output_sha256, "cached_tokens": done.cached_tokens}, None


@dataclass(frozen=True)
class Legs:
    """The measured legs of every case, before judging: the judge's input without its settings."""
    cases: list[dict]
    legs: dict[str, dict]
    problems: list[str]


def _fastest(endpoint: Endpoint, case: dict, nonce: str, repeats: int) -> tuple[dict | None, str | None]:
    """The fastest of `repeats` runs of the case (each on a fresh session), its rate the leg's."""
    runs = []
    for r in range(repeats):
        measured, error = _leg(endpoint, case, f"{nonce}-{r}")
        if measured is None:
            return None, error
        runs.append(measured)
    if len({m["output_sha256"] for m in runs}) > 1:
        return None, f"its {repeats} repeats gave different outputs"
    return max(runs, key=lambda m: m["tokens"] / m["seconds"]), None


def measure_abba(candidate: Endpoint, incumbent: Endpoint, settings: dict) -> Legs:
    """Run the legs A1 B1 B2 A2 over the cases of the settings' size."""
    cases = abba_cases(settings["size"], settings["abba"]["cases"])
    repeats = settings["abba"]["repeats"]
    engines = {"candidate": candidate, "incumbent": incumbent}
    legs: dict[str, dict] = {c["id"]: {} for c in cases}
    problems: list[str] = []
    # One unmeasured run of every case on each engine first: a server's first requests after a start
    # or a pause pay for allocation and cold caches, which would otherwise fall on A1 alone.
    for role in ("incumbent", "candidate"):
        for case in cases:
            _leg(engines[role], case, f"warmup-{uuid.uuid4().hex[:12]}")
    for leg, role in LEGS:
        nonce = uuid.uuid4().hex[:12]  # a fresh session per leg: no leg reuses another's cache
        for case in cases:
            measured, error = _fastest(engines[role], case, nonce, repeats)
            if measured is None:
                problems.append(f"case {case['id']} leg {leg}: {error}")
            else:
                legs[case["id"]][leg] = measured
    return Legs(cases, legs, problems)


def judge_legs(measured: Legs, settings: dict, context: dict, waivers: list[dict] = (),
               candidate_ref: dict | None = None) -> dict:
    """Judge measured legs with the lane's floor, spread bound and min_ratio: a judged verdict-abba."""
    s = settings["abba"]
    cases, legs = measured.cases, measured.legs
    data = {"floor": s["floor"], "max_leg_spread": s["max_leg_spread"],
            "cases": [{"id": c["id"], "weight": c["weight"], "context_depth": min(
                (leg["cached_tokens"] for leg in legs[c["id"]].values()), default=0),
                "legs": {k: {x: v[x] for x in ("tokens", "seconds", "output_sha256")} for k, v in legs[c["id"]].items()}}
                for c in cases]}
    if candidate_ref is not None:
        data["candidate"] = candidate_ref
    record = judge_abba(data, source="abba legs")
    findings, extra = _findings(record, s["min_ratio"])
    extra += [("inconclusive", p) for p in measured.problems]
    corpus = {"name": ABBA.name, "sha256": corpus_sha256(ABBA), "items": len(cases),
              "membership_sha256": membership([(c["id"], c) for c in cases])}
    return finish(record, context={**context, "corpus": corpus}, findings=findings, extra=extra,
                  waivers=waivers, settings=s)


def run_abba(candidate: Endpoint, incumbent: Endpoint, settings: dict, context: dict,
             waivers: list[dict] = (), candidate_ref: dict | None = None) -> dict:
    """Measure the legs and return the judged verdict-abba record."""
    return judge_legs(measure_abba(candidate, incumbent, settings), settings, context, waivers, candidate_ref)


def _findings(record: dict, min_ratio: float) -> tuple[list[dict], list[tuple[str, str]]]:
    """What a waiver must name: failing cases with their ratio, the weighted ratio below
    min_ratio, and each case that made the judge inconclusive."""
    findings: list[dict] = []
    extra: list[tuple[str, str]] = []
    rows = {r["id"]: r for r in record["cases"]}
    for cid in record["failing_cases"]:
        findings.append({"case": cid, "measured": f"{rows[cid]['ratio']:.4f}", "what": "ratio below floor"})
    weighted = record["weighted_ratio"]
    # Below min_ratio is a finding even when the legs are too noisy to judge the floor: the gate
    # asks for at least min_ratio, and the measured ratio is what a waiver must name.
    if weighted is not None and weighted < min_ratio:
        worst = min((r for r in record["cases"] if r["ratio"] is not None), key=lambda r: r["ratio"])
        extra.append(("fail", f"weighted ratio {weighted:.4f} below min_ratio {min_ratio:g} "
                              f"(lowest case {worst['id']}: ratio {worst['ratio']:.4f})"))
        findings.append({"case": "weighted", "measured": f"{weighted:.4f}", "what": "weighted ratio below min_ratio"})
    if record["verdict"] == "inconclusive":
        bound = record["parameters"]["max_leg_spread"]
        for r in record["cases"]:
            if r["status"] == "incomplete":
                findings.append({"case": r["id"], "measured": "incomplete", "what": "missing legs"})
                continue
            spread = max(r["spread_a"], r["spread_b"])
            if spread > bound:
                findings.append({"case": r["id"], "measured": f"{spread:.4f}", "what": "leg spread above bound"})
            if not (r["repeat_identical_a"] and r["repeat_identical_b"]):
                findings.append({"case": r["id"], "measured": "repeat outputs differ", "what": "repeat identity"})
    return findings, extra
