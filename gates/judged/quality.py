"""Powered quality screen: both engines greedy on the same cases x variants, nine programmatic
metrics per pair, judged by gates.stats.judge_noninferiority (paired two-level bootstrap).

Measuring (`measure_quality`: the scored rows, no prompt or output text) is apart from judging
(`judge_quality_rows`), so that measurements kept as evidence can be judged again."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from gates.stats import judge_noninferiority

from gates.judged.client import Endpoint
from gates.judged.corpus import QUALITY, corpus_sha256, membership, quality, quality_pairs
from gates.judged.power import screen_power
from gates.judged.scorers import METRICS, score
from gates.judged.verdict import finish


def measure_quality(candidate: Endpoint, incumbent: Endpoint, settings: dict, *, progress=None) -> dict:
    """Run every pair on both engines: {"rows": [{case, variant, error, incumbent, candidate}]}."""
    s = settings["noninferiority"]
    data = quality()
    pairs = quality_pairs(s["cases"], s["variants"])

    def pair(case: dict, variant: dict) -> dict:
        # Both engines answer at once: the screen reads outputs, never times, and two servers are
        # separate processes, so neither answer depends on the other (on two CPU cores the two
        # overlap well; one after the other took twice as long).
        with ThreadPoolExecutor(max_workers=2) as sides:
            done = dict(zip(("incumbent", "candidate"), sides.map(
                lambda endpoint: endpoint.chat(variant["messages"], s["max_tokens"]), (incumbent, candidate))))
        if any(d.error for d in done.values()):
            return {"case": case["id"], "variant": variant["id"], "error": True}
        row: dict = {"case": case["id"], "variant": variant["id"], "error": False}
        for side, answer in done.items():
            row[side] = score(answer.text, case, variant, data["vocabulary"], data["tools"])
        return row

    # Pairs run `concurrency` at a time (both engines batch them alike); rows keep the corpus order,
    # which the bootstrap's seeded resampling depends on.
    with ThreadPoolExecutor(max_workers=s["concurrency"]) as pool:
        futures = [pool.submit(pair, case, variant) for case, variant in pairs]
        rows = []
        for i, future in enumerate(futures):
            rows.append(future.result())
            if progress:
                progress("noninferiority", i + 1, len(pairs))
    return {"rows": rows}


def judge_quality_rows(measured: dict, settings: dict, context: dict, *, determinism_passed: bool,
                       waivers: list[dict] = (), candidate_ref: dict | None = None) -> dict:
    """Judge scored rows: the judged verdict-noninferiority record."""
    s = settings["noninferiority"]
    pairs = quality_pairs(s["cases"], s["variants"])
    rows = measured["rows"]
    judge_input = {key: s[key] for key in ("seed", "resamples", "confidence", "max_error_rate", "min_perturbed_cases")}
    judge_input.update({"expected_pairs": len(pairs), "determinism_passed": determinism_passed,
                        "metrics": METRICS, "pairs": rows})
    if candidate_ref is not None:
        judge_input["candidate"] = candidate_ref
    record = judge_noninferiority(judge_input, source="quality pairs")
    findings = []
    for m in record["metrics"]:
        if m["passed"] is False:
            findings.append({"case": m["name"], "measured": f"{m['bound']:.4f}", "what": f"{m['bound_side']} bound "
                             f"not {'>' if m['bound_side'] == 'lower' else '<'} {m['threshold']:g}"})
    if record["verdict"] == "inconclusive":
        findings += [{"case": "screen", "measured": reason, "what": "inconclusive"} for reason in record["reasons"]]
    corpus = {"name": QUALITY.name, "sha256": corpus_sha256(QUALITY), "items": len(pairs),
              "membership_sha256": membership([(f"{c['id']}/{v['id']}", v["messages"]) for c, v in pairs])}
    power = screen_power(s["cases"], s["variants"], confidence=s["confidence"])
    return finish(record, context={**context, "corpus": corpus}, findings=findings, waivers=waivers,
                  power=power, settings=s)


def run_quality(candidate: Endpoint, incumbent: Endpoint, settings: dict, context: dict, *,
                determinism_passed: bool, waivers: list[dict] = (), candidate_ref: dict | None = None,
                progress=None) -> dict:
    """Run every pair on both engines and return the judged verdict-noninferiority record."""
    return judge_quality_rows(measure_quality(candidate, incumbent, settings, progress=progress), settings, context,
                              determinism_passed=determinism_passed, waivers=waivers, candidate_ref=candidate_ref)
