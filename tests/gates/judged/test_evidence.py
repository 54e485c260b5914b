"""Measuring apart from judging: measurements kept as evidence are judged again to the same values,
so a waiver naming a measured value applies on the rerun; thresholds are applied afresh; evidence
taken with other sizes is refused. (Synthetic measurements: the live ones are in test_live.py.)"""

import hashlib
import json
from dataclasses import asdict

import pytest

from gates.judged.corpus import determinism_prompts, quality_pairs
from gates.judged.errors import SettingsError
from gates.judged.run import EVIDENCE_SCHEMA, judge_measured
from gates.judged.scorers import METRICS
from gates.judged.settings import measuring, resolve
from gates.judged.waivers import blocks
from releases.schema import validate
from tests.gates.judged.test_waivers import CONTEXT, OTHER, REF, _legs

SERVED = {"engine_version": "0.1.0", "package_sha256": None, "model_sha256": None, "profile_sha256": None}
KEY = "9" * 64


def _evidence(lane_gates=None, candidate_rate=120.0) -> dict:
    """What measure_judged returns for two engines that agree everywhere, the candidate faster."""
    settings = resolve("cpu", lane_gates)
    out = hashlib.sha256(b"answer").hexdigest()
    runs = [[{"prompt": ident, "output_sha256": out} for ident, _ in determinism_prompts(settings["determinism"]["prompts"])]
            for _ in range(2)]
    scores = {m["name"]: 1.0 for m in METRICS}
    rows = [{"case": c["id"], "variant": v["id"], "error": False, "incumbent": dict(scores), "candidate": dict(scores)}
            for c, v in quality_pairs(settings["noninferiority"]["cases"], settings["noninferiority"]["variants"])]
    timing = lambda s: [{"ttft_s": s, "cached_tokens": 64, "error": None}] * 3  # noqa: E731
    positions = {p: timing(0.2) for p in ("warm", "sibling", "restored", "fanout-1", "fanout-2")}
    return {"schema": EVIDENCE_SCHEMA, "size": "cpu", "settings": measuring(settings),
            "served": {"candidate": SERVED, "incumbent": SERVED},
            "determinism": {"runs": runs, "errors": [], "fresh_server": True},
            "abba": asdict(_legs(candidate_rate)),
            "noninferiority": {"rows": rows},
            "latency": {"positions": {"incumbent": positions, "candidate": dict(positions)}, "restarted": True},
            "evidence_sha256": KEY}


def _judge(evidence, lane_gates=None, waivers=()):
    return judge_measured(evidence, lane="cpu-reference", lane_gates=lane_gates, incumbent_identity=CONTEXT["incumbent"],
                          candidate_ref=REF, waivers=list(waivers))


def _waiver(measured, **over):
    w = {"id": "abba-cpu-reference-weighted", "scope": "gate", "gate": "abba", "lane": "cpu-reference",
         "case": "weighted", "measured": measured, "approved_by": "release-lead", "reason": "tests", "candidate": REF}
    return {**w, **over}


def test_kept_measurements_judge_the_same_and_name_their_evidence():
    evidence = _evidence()
    first = _judge(evidence)
    again = _judge(json.loads(json.dumps(evidence)))  # as Prefect's JSON result serializer gives it back
    assert first == again
    assert {k: v["verdict"] for k, v in first.items()} == {
        "verdict-determinism": "pass", "verdict-abba": "pass", "verdict-noninferiority": "pass", "verdict-latency": "pass"}
    assert {v["judged"]["evidence_sha256"] for v in first.values()} == {KEY}
    for kind, record in first.items():  # what a receipt's predicate must be (releases/schemas)
        validate(kind, record, where=kind)
    assert first["verdict-abba"]["weighted_ratio"] == pytest.approx(1.2)


def test_a_waiver_for_the_measured_value_applies_when_the_evidence_is_judged_again():
    gates = {"abba": {"min_ratio": 1000.0}}
    evidence = _evidence(gates)
    failed = _judge(evidence, gates)["verdict-abba"]
    assert failed["verdict"] == "fail" and blocks(failed)
    finding = next(f for f in failed["judged"]["findings"] if f["case"] == "weighted")
    assert finding["measured"] == "1.2000"
    waived = _judge(json.loads(json.dumps(evidence)), gates, [_waiver(finding["measured"])])["verdict-abba"]
    assert waived["verdict"] == "fail" and not blocks(waived)  # disclosed as failed, waived by digest
    assert waived["judged"]["waivers"][0]["applied"] is True
    for other in (_waiver("1.1999"), _waiver(finding["measured"], candidate=OTHER),
                  _waiver(finding["measured"], case="deep-384-decode-48"), _waiver(finding["measured"], gate="latency")):
        still = _judge(evidence, gates, [other])["verdict-abba"]
        assert blocks(still) and still["judged"]["waivers"][0]["applied"] is False


def test_thresholds_are_applied_afresh_but_sizes_must_match():
    evidence = _evidence()
    assert measuring(resolve("cpu", {"abba": {"min_ratio": 9.0, "floor": 0.5}})) == measuring(resolve("cpu"))
    assert _judge(evidence, {"abba": {"floor": 1.5}})["verdict-abba"]["verdict"] == "fail"
    with pytest.raises(SettingsError, match="other gate sizes"):
        _judge(evidence, {"noninferiority": {"cases": 9}})
    assert measuring(resolve("cpu", {"abba": {"repeats": 1}})) != measuring(resolve("cpu"))
