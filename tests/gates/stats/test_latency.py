import pytest

from gates.stats import InputError, judge_latency


def pos(i, inc, cand):
    return {"id": i, "incumbent_s": inc, "candidate_s": cand}


def test_allowance_is_the_larger_of_absolute_and_relative():
    # 0.5 s: max(0.25, 0.125) = 0.25 -> allowed 0.75; 4 s: max(0.25, 1.0) = 1.0 -> allowed 5.0
    r = judge_latency({"positions": [pos("short", 0.5, 0.625), pos("long", 4.0, 4.5)]})
    assert [p["allowed_s"] for p in r["positions"]] == [0.75, 5.0]
    assert [p["margin_s"] for p in r["positions"]] == [0.125, 0.5]
    assert r["worst"] == {"id": "short", "margin_s": 0.125}
    assert r["verdict"] == "pass" and r["reasons"] == []


def test_candidate_exactly_at_allowance_passes():
    r = judge_latency({"positions": [pos(0, 1.0, 1.25), pos(1, 8.0, 10.0)]})
    assert [p["margin_s"] for p in r["positions"]] == [0.0, 0.0] and r["verdict"] == "pass"


def test_over_allowance_fails_and_names_position():
    r = judge_latency({"absolute_s": 0.1, "relative": 0.1,
                       "positions": [pos(0, 1.0, 1.05), pos(1, 2.0, 2.5), pos(2, 3.0, 3.0)]})
    assert r["verdict"] == "fail"
    assert r["worst"]["id"] == 1 and r["worst"]["margin_s"] == pytest.approx(-0.3)
    assert r["counts"] == {"positions": 3, "measured": 3, "over": 1}
    assert r["reasons"] == ["position 1: candidate 2.5000 s exceeds allowed 2.2000 s"]


def test_unmeasured_position_is_inconclusive_unless_another_fails():
    r = judge_latency({"positions": [pos(0, 1.0, None), pos(1, 1.0, 1.0)]})
    assert r["verdict"] == "inconclusive" and r["positions"][0]["passed"] is None
    r = judge_latency({"positions": [pos(0, 1.0, None), pos(1, 1.0, 9.0)]})
    assert r["verdict"] == "fail"


def test_no_positions_is_inconclusive():
    assert judge_latency({"positions": []})["verdict"] == "inconclusive"


@pytest.mark.parametrize("data, path", [
    ({"positions": [pos(0, -1.0, 1.0)]}, "$.positions[0].incumbent_s"),
    ({"positions": [pos(0, 1.0, 1.0), pos(0, 1.0, 1.0)]}, "$.positions[1]"),
    ({"relative": "25%", "positions": []}, "$.relative"),
    ({"positions": [{"id": 0, "incumbent_s": 1.0}]}, "$.positions[0]"),
])
def test_bad_input(data, path):
    with pytest.raises(InputError) as exc:
        judge_latency(data)
    assert exc.value.path == path
