import pytest

from gates.stats import InputError, judge_abba
from gates.stats.canonical import digest
from tests.gates.stats.inputs import CANDIDATE, abba_case, even, sha


def test_known_ratios_floor_and_weighted_geometric_mean():
    cases = [
        # rates A1 100, A2 100, B1 104, B2 96 -> (104+96)/(100+100) = 1.0
        abba_case("flat", {"A1": 100, "B1": 104, "B2": 96, "A2": 100}, weight=1, tokens=64),
        # (96+96)/(100+100) = 0.96
        abba_case("slower", even(100, 96), weight=2, tokens=128),
        # (80+80)/(50+50) = 1.6
        abba_case("faster", even(50, 80), weight=1, tokens=32),
    ]
    r = judge_abba({"cases": cases})
    ratios = {c["id"]: c["ratio"] for c in r["cases"]}
    assert ratios == pytest.approx({"flat": 1.0, "slower": 0.96, "faster": 1.6}, abs=1e-12)
    assert r["verdict"] == "pass" and r["failing_cases"] == [] and r["reasons"] == []
    # weights x tokens over four legs: 1*256, 2*512, 1*128 -> exp(sum w ln r / sum w)
    import math
    w = [256, 1024, 128]
    expected = math.exp((w[0] * math.log(1.0) + w[1] * math.log(0.96) + w[2] * math.log(1.6)) / sum(w))
    assert r["weighted_ratio"] == pytest.approx(expected, rel=1e-12)
    assert r["parameters"]["floor"] == 0.95
    assert {c["id"]: c["tokens"] for c in r["cases"]} == {"flat": 256, "slower": 512, "faster": 128}


def test_case_below_floor_fails_and_is_named():
    cases = [abba_case("ok", even(100, 100)), abba_case("slow", even(100, 90))]
    r = judge_abba({"cases": cases})
    assert r["verdict"] == "fail"
    assert r["failing_cases"] == ["slow"]
    assert r["counts"]["below_floor"] == 1 and r["counts"]["failing"] == 1
    assert "slow" in r["reasons"][0] and "0.9000" in r["reasons"][0]


def test_ratio_equal_to_floor_passes_and_just_below_fails():
    # 0.5 = (1+1)/(2+2) exactly; the floor is a minimum, so equality passes.
    at = judge_abba({"floor": 0.5, "cases": [abba_case("c", even(2.0, 1.0), tokens=4)]})
    assert at["cases"][0]["ratio"] == 0.5 and at["verdict"] == "pass"
    below = judge_abba({"floor": 0.5000001, "cases": [abba_case("c", even(2.0, 1.0), tokens=4)]})
    assert below["verdict"] == "fail"


def test_custom_floor():
    r = judge_abba({"floor": 0.85, "cases": [abba_case("slow", even(100, 90))]})
    assert r["verdict"] == "pass"


def _slow_input(waivers, candidate=None):
    data = {"cases": [abba_case("ok", even(100, 100)), abba_case("slow", even(100, 93))], "waivers": waivers}
    if candidate:
        data["candidate"] = candidate
    return data


def test_waiver_naming_case_and_ratio_turns_fail_into_pass_and_is_digested():
    waiver = {"case": "slow", "measured_ratio": 0.93, "approved_by": "perf-lead", "reason": "known regression"}
    r = judge_abba(_slow_input([waiver]))
    assert r["verdict"] == "pass"
    assert r["counts"]["waived"] == 1 and r["failing_cases"] == []
    assert r["waivers"][0]["sha256"] == digest(waiver)
    assert r["waivers"][0]["applied"] is True
    assert [c["status"] for c in r["cases"]] == ["pass", "waived"]
    assert "waived" in r["reasons"][0]


def test_waiver_digest_is_sha256_of_canonical_json():
    import hashlib
    import json
    waiver = {"measured_ratio": 0.93, "case": "slow", "approved_by": "perf-lead", "note": "é"}
    canonical = json.dumps(waiver, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    r = judge_abba(_slow_input([waiver]))
    assert r["waivers"][0]["sha256"] == hashlib.sha256(canonical).hexdigest()


@pytest.mark.parametrize("waiver, note", [
    ({"case": "slow", "measured_ratio": 0.95, "approved_by": "x"}, "below the waived"),
    ({"case": "other", "measured_ratio": 0.93, "approved_by": "x"}, "no complete case"),
    ({"case": "ok", "measured_ratio": 0.93, "approved_by": "x"}, "meets the floor"),
    ({"case": "slow", "measured_ratio": 0.93, "approved_by": "x",
      "candidate": {**CANDIDATE, "id": "f" * 64}}, "different candidate"),
])
def test_waiver_that_does_not_cover_the_measurement_is_not_applied(waiver, note):
    r = judge_abba(_slow_input([waiver], candidate=CANDIDATE))
    assert r["verdict"] == "fail" and r["failing_cases"] == ["slow"]
    assert r["waivers"][0]["applied"] is False and note in r["waivers"][0]["note"]


def test_release_waiver_shape_subject_and_measured_string_is_accepted():
    waiver = {"id": "w1", "scope": "lane", "subject": "slow", "measured": "0.9300", "approved_by": "perf-lead",
              "reason": "r", "candidate": CANDIDATE}
    r = judge_abba(_slow_input([waiver], candidate=CANDIDATE))
    assert r["verdict"] == "pass" and r["candidate"] == CANDIDATE


def test_waiver_without_approver_is_bad_input():
    with pytest.raises(InputError) as exc:
        judge_abba(_slow_input([{"case": "slow", "measured_ratio": 0.93}]))
    assert exc.value.path == "$.waivers[0]" and "approved_by" in exc.value.message


def test_waiver_with_non_numeric_measured_is_bad_input():
    with pytest.raises(InputError) as exc:
        judge_abba(_slow_input([{"case": "slow", "measured": "about 0.9", "approved_by": "x"}]))
    assert exc.value.path == "$.waivers[0].measured"


def test_missing_leg_is_inconclusive_with_reason():
    case = abba_case("c", even(100, 100))
    del case["legs"]["B2"]
    r = judge_abba({"cases": [case, abba_case("slow", even(100, 50))]})
    assert r["verdict"] == "inconclusive"
    assert r["reasons"] == ["case c: missing leg(s) B2"]
    assert r["cases"][0]["status"] == "incomplete" and r["cases"][0]["ratio"] is None


def test_leg_spread_beyond_bound_is_inconclusive():
    wobbly = abba_case("c", {"A1": 100, "B1": 100, "B2": 100, "A2": 80})  # |100-80|/90 = 0.222
    r = judge_abba({"cases": [wobbly]})
    assert r["verdict"] == "inconclusive"
    assert "A-leg spread 0.2222" in r["reasons"][0]
    assert judge_abba({"max_leg_spread": 0.25, "cases": [wobbly]})["verdict"] == "pass"


def test_repeat_and_cross_identity_counts():
    same = {leg: sha("x") for leg in ("A1", "B1", "B2", "A2")}
    cross_differs = {"A1": sha("a"), "A2": sha("a"), "B1": sha("b"), "B2": sha("b")}
    repeat_differs = {"A1": sha("a"), "A2": sha("a2"), "B1": sha("b"), "B2": sha("b")}
    cases = [abba_case("s", even(1, 1), digests=same), abba_case("x", even(1, 1), digests=cross_differs)]
    r = judge_abba({"cases": cases})
    assert r["verdict"] == "pass"
    assert (r["counts"]["repeat_identical_a"], r["counts"]["repeat_identical_b"], r["counts"]["cross_identical"]) == (2, 2, 1)
    r = judge_abba({"cases": cases + [abba_case("r", even(1, 1), digests=repeat_differs)]})
    assert r["verdict"] == "inconclusive" and "A1/A2 differ" in r["reasons"][0]
    assert r["counts"]["repeat_identical_a"] == 2


def test_no_cases_is_inconclusive():
    assert judge_abba({"cases": []})["verdict"] == "inconclusive"


@pytest.mark.parametrize("mutate, path", [
    (lambda d: d["cases"][0]["legs"]["A1"].update(seconds=0), "$.cases[0].legs.A1.seconds"),
    (lambda d: d["cases"][0]["legs"]["B1"].update(tokens=2.5), "$.cases[0].legs.B1.tokens"),
    (lambda d: d["cases"][0]["legs"]["B1"].update(output_sha256="zz"), "$.cases[0].legs.B1.output_sha256"),
    (lambda d: d["cases"][0].pop("weight"), "$.cases[0]"),
    (lambda d: d["cases"].append(dict(d["cases"][0])), "$.cases[1]"),
    (lambda d: d["cases"][0].update(weight=float("nan")), "$.cases[0].weight"),
])
def test_bad_input_names_the_json_path(mutate, path):
    data = {"cases": [abba_case("c", even(100, 100))]}
    mutate(data)
    with pytest.raises(InputError) as exc:
        judge_abba(data, source="in.json")
    assert exc.value.path == path and exc.value.source == "in.json"
    assert str(exc.value).startswith(f"in.json: {path}: ")
