"""The four judged gates against two running servers, in the order their inputs need:
determinism first (the quality screen requires it passed), then ABBA, quality, TTFT parity.

Measuring and judging are apart: `measure_judged` returns the measurements of all four gates as
plain JSON (digests, rates, scores and times; never prompts or outputs), `judge_measured` applies
the lane's thresholds and the waivers to them. A release flow keeps the measurements as evidence
keyed by what was measured (flows/judged_evidence.py), so a rerun of the same bytes judges the same
values again: a waiver naming a measured value can then apply.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable

from gates.judged.abba import Legs, judge_legs, measure_abba
from gates.judged.client import Endpoint
from gates.judged.determinism import judge_determinism_runs, measure_determinism
from gates.judged.errors import SettingsError
from gates.judged.identity import check_candidate_ref, check_incumbent, served_identity
from gates.judged.latency import judge_latency_positions, measure_latency
from gates.judged.quality import judge_quality_rows, measure_quality
from gates.judged.settings import measuring, resolve

KINDS = ("verdict-determinism", "verdict-abba", "verdict-noninferiority", "verdict-latency")
EVIDENCE_SCHEMA = "assay/judged-evidence/v1"


def measure_judged(candidate: Endpoint, incumbent: Endpoint, *, size: str, lane_gates: dict | None = None,
                   restart_candidate: Callable[[], Endpoint] | None = None,
                   restart_incumbent: Callable[[], Endpoint] | None = None,
                   progress: Callable[[str], None] | None = None) -> dict:
    """Measure the four gates: {"schema", "size", "settings" (the measuring keys), "served",
    "determinism", "abba", "noninferiority", "latency"}."""
    settings = resolve(size, lane_gates)
    say = progress or (lambda text: None)
    served = {"candidate": served_identity(candidate), "incumbent": served_identity(incumbent)}
    current = {"candidate": candidate}

    def restarted() -> Endpoint:  # keep the endpoint of the server that runs now
        current["candidate"] = restart_candidate()
        return current["candidate"]

    say("determinism")
    determinism = measure_determinism(candidate, settings, restart=restarted if restart_candidate else None)
    candidate = current["candidate"]
    say("abba")
    abba = asdict(measure_abba(candidate, incumbent, settings))
    say("noninferiority")
    quality = measure_quality(candidate, incumbent, settings,
                              progress=lambda gate, done, total: say(f"{gate} {done}/{total}"))
    say("latency")
    latency = measure_latency(candidate, incumbent, settings, restart_candidate=restart_candidate,
                              restart_incumbent=restart_incumbent)
    return {"schema": EVIDENCE_SCHEMA, "size": size, "settings": measuring(settings), "served": served,
            "determinism": determinism, "abba": abba, "noninferiority": quality, "latency": latency}


def judge_measured(evidence: dict, *, lane: str, lane_gates: dict | None = None,
                   incumbent_identity: dict | None = None, candidate_ref: dict | None = None,
                   waivers: list[dict] = ()) -> dict[str, dict]:
    """Return {kind: judged verdict record} for measurements `measure_judged` returned, judged with
    the lane's thresholds (which may differ from those in force when they were measured) and the
    waivers. The measuring settings must be those the evidence was taken with."""
    size = evidence["size"]
    settings = resolve(size, lane_gates)
    if measuring(settings) != evidence["settings"]:
        raise SettingsError("size", "the evidence was measured with other gate sizes or corpora than the lane's "
                                    "settings name; measure again")
    context = {"lane": lane, "size": size, "incumbent": check_incumbent(incumbent_identity),
               "served": evidence["served"]}
    if "evidence_sha256" in evidence:
        context["evidence_sha256"] = evidence["evidence_sha256"]
    common = {"waivers": list(waivers), "candidate_ref": check_candidate_ref(candidate_ref)}
    out: dict[str, dict] = {}
    out["verdict-determinism"] = judge_determinism_runs(evidence["determinism"], settings, context, **common)
    out["verdict-abba"] = judge_legs(Legs(**evidence["abba"]), settings, context, **common)
    out["verdict-noninferiority"] = judge_quality_rows(
        evidence["noninferiority"], settings, context,
        determinism_passed=out["verdict-determinism"]["verdict"] == "pass", **common)
    out["verdict-latency"] = judge_latency_positions(evidence["latency"], settings, context, **common)
    return out


def run_judged(candidate: Endpoint, incumbent: Endpoint, *, lane: str, size: str,
               lane_gates: dict | None = None, incumbent_identity: dict | None = None,
               candidate_ref: dict | None = None, waivers: list[dict] = (),
               restart_candidate: Callable[[], Endpoint] | None = None,
               restart_incumbent: Callable[[], Endpoint] | None = None,
               progress: Callable[[str], None] | None = None) -> dict[str, dict]:
    """Return {kind: judged verdict record} for the four gates: measure, then judge.

    lane_gates: the lane's `[lanes.gates.*]` tables ({"abba": {"min_ratio": 0.97}, ...}).
    incumbent_identity: builders.incumbent's {version, wheel_sha256, source_commit, origin}.
    restart_*: optional hooks that restart a server and return its new endpoint (a fresh server
    for the determinism rerun, and the restored-session latency position)."""
    check_incumbent(incumbent_identity)  # bad input is refused before anything is measured
    check_candidate_ref(candidate_ref)
    evidence = measure_judged(candidate, incumbent, size=size, lane_gates=lane_gates,
                              restart_candidate=restart_candidate, restart_incumbent=restart_incumbent,
                              progress=progress)
    return judge_measured(evidence, lane=lane, lane_gates=lane_gates, incumbent_identity=incumbent_identity,
                          candidate_ref=candidate_ref, waivers=waivers)
