import pytest

from gates.stats import InputError, judge_determinism
from tests.gates.stats.inputs import sha


def run(outputs: dict) -> list[dict]:
    return [{"prompt": p, "output_sha256": sha(o)} for p, o in outputs.items()]


def test_identical_runs_pass():
    outs = {f"p{i}": f"out{i}" for i in range(5)}
    r = judge_determinism({"runs": [run(outs), run(dict(reversed(list(outs.items()))))]})
    assert r["verdict"] == "pass" and r["first_difference"] is None
    assert r["counts"] == {"runs": 2, "prompts": 5, "differing": 0, "identical": 5}


def test_first_differing_prompt_in_first_run_order_is_reported():
    a = {"p0": "x", "p1": "y", "p2": "z", "p3": "w"}
    b = {**a, "p3": "W", "p1": "Y"}
    r = judge_determinism({"runs": [run(a), run(b)]})
    assert r["verdict"] == "fail"
    assert r["first_difference"] == {"prompt": "p1", "run": 1, "sha256": [sha("y"), sha("Y")]}
    assert r["counts"]["differing"] == 2 and r["counts"]["identical"] == 2
    assert r["reasons"][0].startswith("prompt p1: run 1 output differs from run 0 (2 of 4")


def test_difference_in_third_run_is_found():
    a = {"p0": "x", "p1": "y"}
    r = judge_determinism({"runs": [run(a), run(a), run({**a, "p0": "q"})]})
    assert r["first_difference"]["run"] == 2 and r["verdict"] == "fail"


@pytest.mark.parametrize("runs, reason", [
    ([[{"prompt": "p", "output_sha256": sha("x")}]], "1 run(s) given"),
    ([[], []], "0 prompt(s), need 1"),
    ([run({"p0": "x", "p1": "y"}), run({"p0": "x"})], "run 1: 1 prompt(s) missing"),
    ([run({"p0": "x"}), run({"p0": "x", "p9": "y"})], "1 not in run 0"),
])
def test_incomplete_runs_are_inconclusive(runs, reason):
    r = judge_determinism({"runs": runs})
    assert r["verdict"] == "inconclusive" and any(reason in x for x in r["reasons"]), r["reasons"]


def test_difference_with_missing_prompt_still_fails():
    r = judge_determinism({"runs": [run({"p0": "x", "p1": "y"}), run({"p0": "z"})]})
    assert r["verdict"] == "fail" and len(r["reasons"]) == 2


def test_min_prompts():
    r = judge_determinism({"min_prompts": 3, "runs": [run({"p0": "x"}), run({"p0": "x"})]})
    assert r["verdict"] == "inconclusive"


def test_duplicate_prompt_is_bad_input():
    with pytest.raises(InputError) as exc:
        judge_determinism({"runs": [run({"p0": "x"}) * 2, run({"p0": "x"})]})
    assert exc.value.path == "$.runs[0][1]"
