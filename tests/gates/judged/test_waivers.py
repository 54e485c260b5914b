"""Waivers apply only to exactly the failure they name: gate, lane, case, measured value, candidate."""

import hashlib

import pytest

from gates.judged.abba import Legs, judge_legs
from gates.judged.corpus import abba_cases
from gates.judged.settings import resolve
from gates.judged.waivers import applies, blocks, why_not
from releases.canonical import digest

REF = {"id": "a" * 64, "commit": "b" * 40, "tree": "c" * 40}
OTHER = {"id": "d" * 64, "commit": "b" * 40, "tree": "c" * 40}
CONTEXT = {"lane": "cpu-reference", "size": "cpu", "incumbent": {
    "version": "0.1.0", "wheel_sha256": "e" * 64, "source_commit": "f" * 40, "origin": "ref"},
    "served": {"candidate": {"engine_version": "0.1.0", "package_sha256": None, "model_sha256": None,
                             "profile_sha256": None}, "incumbent": None}}


def _legs(candidate_rate: float) -> Legs:
    """Synthetic legs: the incumbent decodes 100 tokens/s, the candidate `candidate_rate`."""
    cases = abba_cases("cpu")
    out = hashlib.sha256(b"same output").hexdigest()
    legs = {c["id"]: {leg: {"tokens": 100, "seconds": 100 / (candidate_rate if leg[0] == "B" else 100.0),
                            "output_sha256": out, "cached_tokens": 0} for leg in ("A1", "B1", "B2", "A2")}
            for c in cases}
    return Legs(cases, legs, [])


def _verdict(waivers=(), **abba):
    settings = resolve("cpu", {"abba": abba})
    return judge_legs(_legs(80.0), settings, CONTEXT, list(waivers), REF)


def _waiver(**over):
    w = {"id": "slow-ok", "scope": "gate", "gate": "abba", "lane": "cpu-reference", "case": "fresh-64-decode-24",
         "measured": "0.8000", "approved_by": "release-lead", "reason": "known regression", "candidate": REF}
    w.update(over)
    return w


def test_a_case_below_the_floor_fails_naming_case_and_ratio():
    v = _verdict()
    assert v["verdict"] == "fail" and blocks(v)
    assert v["failing_cases"] == ["fresh-64-decode-24", "deep-384-decode-48"]
    assert "case fresh-64-decode-24: ratio 0.8000 below floor 0.95" in v["reasons"][0]
    assert {"case": "fresh-64-decode-24", "measured": "0.8000", "what": "ratio below floor"} in v["judged"]["findings"]
    assert v["judged"]["incumbent"]["source_commit"] == "f" * 40 and v["judged"]["lane"] == "cpu-reference"
    assert v["candidate"] == REF


def test_min_ratio_impossibly_high_fails_on_the_weighted_ratio_naming_the_lowest_case():
    legs = _legs(100.0)
    v = judge_legs(legs, resolve("cpu", {"abba": {"min_ratio": 5.0}}), CONTEXT, [], REF)
    assert v["judged"]["judge_verdict"] == "pass" and v["verdict"] == "fail"
    assert v["reasons"] == ["weighted ratio 1.0000 below min_ratio 5 (lowest case fresh-64-decode-24: ratio 1.0000)"]
    assert v["judged"]["findings"] == [{"case": "weighted", "measured": "1.0000",
                                        "what": "weighted ratio below min_ratio"}]


def test_exact_waivers_unblock_and_are_disclosed_by_digest():
    waivers = [_waiver(), _waiver(id="slow-ok-2", case="deep-384-decode-48", measured=0.8)]
    assert blocks(_verdict(waivers))  # the weighted ratio (0.8 < min_ratio 0.95) is a finding of its own
    waivers.append(_waiver(id="slow-ok-3", case="weighted", measured="0.8000"))
    v = _verdict(waivers)
    assert v["verdict"] == "fail" and not blocks(v)
    assert [w["sha256"] for w in v["judged"]["waivers"]] == [digest(w) for w in waivers]
    assert all(w["applied"] for w in v["judged"]["waivers"])


def test_one_waiver_of_two_failures_still_blocks():
    v = _verdict([_waiver()])
    assert blocks(v) and v["judged"]["waivers"][0]["applied"]


@pytest.mark.parametrize("field,value,why", [
    ("case", "deep-2048-decode-128", "no finding for case"),
    ("gate", "latency", "names gate"),
    ("gate", "verdict-noninferiority", "names gate"),
    ("lane", "gpu-h200", "names lane"),
    ("candidate", OTHER, "another candidate"),
    ("measured", "0.7999", "is not the verdict's"),
    ("approved_by", "", "no approver"),
    ("scope", "reproducibility", "not a gate waiver"),
])
def test_a_waiver_for_anything_else_does_not_apply(field, value, why):
    v = _verdict()
    w = _waiver(**{field: value})
    assert not applies(w, v, "cpu-reference")
    assert why in why_not(w, v, "cpu-reference")
    assert applies(_waiver(), v, "cpu-reference")
    assert not applies(_waiver(), v, "other-lane")
    waived = _verdict([w, _waiver(id="x", case="deep-384-decode-48")])
    assert blocks(waived) and not waived["judged"]["waivers"][0]["applied"]


def test_a_passing_verdict_has_nothing_to_waive():
    v = judge_legs(_legs(100.0), resolve("cpu"), CONTEXT, [_waiver(measured="1.0000")], REF)
    assert v["verdict"] == "pass" and not blocks(v) and v["judged"]["findings"] == []
    assert v["judged"]["waivers"][0]["applied"] is False
