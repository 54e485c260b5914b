"""Properties of the ABBA gate over generated measurements."""

import copy

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gates.stats import judge_abba
from tests.gates.stats.inputs import LEGS, sha

rate = st.floats(min_value=1.0, max_value=1e4, allow_nan=False, allow_infinity=False)
case_rates = st.tuples(rate, rate, rate, rate)


@st.composite
def abba_inputs(draw):
    n = draw(st.integers(min_value=1, max_value=6))
    cases = []
    for i in range(n):
        rates = draw(case_rates)
        tokens = draw(st.integers(min_value=1, max_value=4096))
        weight = draw(st.floats(min_value=0.1, max_value=10))
        digest = sha(f"out-{i}")
        cases.append({"id": f"c{i}", "weight": weight,
                      "legs": {leg: {"tokens": tokens, "seconds": tokens / r, "output_sha256": digest}
                               for leg, r in zip(LEGS, rates)}})
    spread = draw(st.sampled_from([0.1, 10.0]))  # 10.0: spread never decides, so ratios do
    return {"floor": draw(st.sampled_from([0.9, 0.95, 1.0])), "max_leg_spread": spread, "cases": cases}


def _swap(data):
    swapped = copy.deepcopy(data)
    for case in swapped["cases"]:
        legs = case["legs"]
        legs["A1"], legs["B1"], legs["B2"], legs["A2"] = legs["B1"], legs["A1"], legs["A2"], legs["B2"]
    return swapped


@settings(max_examples=60, deadline=None)
@given(abba_inputs())
def test_swapping_incumbent_and_candidate_inverts_ratios(data):
    r, s = judge_abba(data), judge_abba(_swap(data))
    for a, b in zip(r["cases"], s["cases"]):
        assert abs(a["ratio"] * b["ratio"] - 1.0) < 1e-12
        assert (a["spread_a"], a["spread_b"]) == (b["spread_b"], b["spread_a"])
    assert abs(r["weighted_ratio"] * s["weighted_ratio"] - 1.0) < 1e-12


@settings(max_examples=60, deadline=None)
@given(abba_inputs(), st.floats(min_value=1e-3, max_value=1e3))
def test_scaling_all_rates_by_a_constant_changes_no_verdict(data, scale):
    # Rounding can move a value sitting within 1e-9 of the floor or the spread bound across it;
    # such boundary draws say nothing about scale invariance, so they are set aside.
    base = judge_abba(data)
    for c in base["cases"]:
        assume(abs(c["ratio"] - data["floor"]) > 1e-9)
        assume(min(abs(c["spread_a"] - data["max_leg_spread"]), abs(c["spread_b"] - data["max_leg_spread"])) > 1e-9)
    scaled = copy.deepcopy(data)
    for case in scaled["cases"]:
        for leg in case["legs"].values():
            leg["seconds"] /= scale
            assume(1e-6 <= leg["seconds"] <= 1e7)   # the schema's bounds on a leg's wall time
    out = judge_abba(scaled)
    assert out["verdict"] == base["verdict"]
    assert out["failing_cases"] == base["failing_cases"]
    for a, b in zip(base["cases"], out["cases"]):
        assert abs(a["ratio"] - b["ratio"]) <= 1e-12 * a["ratio"]


@settings(max_examples=60, deadline=None)
@given(abba_inputs(), st.data())
def test_removing_a_leg_makes_the_verdict_inconclusive_never_pass(data, draw):
    broken = copy.deepcopy(data)
    case = draw.draw(st.sampled_from(broken["cases"]))
    leg = draw.draw(st.sampled_from(LEGS))
    del case["legs"][leg]
    r = judge_abba(broken)
    assert r["verdict"] == "inconclusive"
    assert f"case {case['id']}: missing leg(s) {leg}" in r["reasons"]
