import math
import random

import numpy as np
import pytest
import scipy.stats

from gates.stats import InputError, judge_noninferiority
from gates.stats.bootstrap import PairedData, resample_statistics
from gates.stats.reference import quantile, reference_bounds
from tests.gates.stats.inputs import CANDIDATE

RECALL = {"name": "recall", "kind": "difference", "better": "higher", "margin": 0.02}
UNSUPPORTED = {"name": "unsupported", "kind": "difference", "better": "lower", "margin": 0.03}
LENGTH = {"name": "length", "kind": "ratio", "better": "lower", "margin": 0.10}


def screen(pairs, metrics, **extra):
    data = {"seed": 11, "resamples": 2000, "metrics": metrics, "pairs": pairs, "determinism_passed": True,
            "min_perturbed_cases": 0, **extra}
    return judge_noninferiority(data)


def constant_pairs(inc: dict, cand: dict, cases=12, variants=3):
    return [{"case": f"c{c}", "variant": v, "error": False, "incumbent": dict(inc), "candidate": dict(cand)}
            for c in range(cases) for v in range(variants)]


def noisy_pairs(cases, variants, seed, uneven=False):
    rnd = random.Random(seed)
    pairs = []
    for c in range(cases):
        level = rnd.random()
        for v in range(rnd.randint(1, variants) if uneven else variants):
            inc = {"recall": level + rnd.gauss(0, 0.1), "unsupported": rnd.random() * 0.1, "length": 50 + rnd.random() * 20}
            cand = {"recall": inc["recall"] + rnd.gauss(-0.005, 0.04), "unsupported": rnd.random() * 0.1,
                    "length": inc["length"] * (1 + rnd.gauss(0.02, 0.05))}
            pairs.append({"case": f"c{c}", "variant": v, "incumbent": inc, "candidate": cand})
    return pairs


# --- known answers ---------------------------------------------------------------------------------

def test_constant_difference_gives_bound_equal_to_it_and_passes_inside_margin():
    r = screen(constant_pairs({"recall": 0.5}, {"recall": 0.4921875}), [RECALL])  # diff -2**-7
    m = r["metrics"][0]
    assert (m["estimate"], m["bound"], m["threshold"], m["bound_side"]) == (-0.0078125, -0.0078125, -0.02, "lower")
    assert m["passed"] is True and r["verdict"] == "pass" and r["reasons"] == []


def test_two_point_bootstrap_distribution_bounds_are_its_extremes():
    # Two cases, one variant each, differences 0 and 1: resample means are 0, 0.5, 1 with
    # probabilities 1/4, 1/2, 1/4, so the 5% quantile is 0 and the 95% quantile is 1.
    pairs = [{"case": "a", "variant": 0, "incumbent": {"x": 0.0}, "candidate": {"x": 0.0}},
             {"case": "b", "variant": 0, "incumbent": {"x": 0.0}, "candidate": {"x": 1.0}}]
    hi = screen(pairs, [{"name": "x", "kind": "difference", "better": "higher", "margin": 0.5}])
    lo = screen(pairs, [{"name": "x", "kind": "difference", "better": "lower", "margin": 0.5}])
    assert hi["metrics"][0]["bound"] == 0.0 and hi["metrics"][0]["estimate"] == 0.5 and hi["verdict"] == "pass"
    assert lo["metrics"][0]["bound"] == 1.0 and lo["verdict"] == "fail"


@pytest.mark.parametrize("metric, inc, cand", [
    ({"name": "m", "kind": "difference", "better": "higher", "margin": 0.03125}, 0.5, 0.46875),
    ({"name": "m", "kind": "difference", "better": "lower", "margin": 0.03125}, 0.5, 0.53125),
    ({"name": "m", "kind": "ratio", "better": "lower", "margin": 0.125}, 8.0, 9.0),
    ({"name": "m", "kind": "ratio", "better": "higher", "margin": 0.125}, 8.0, 7.0),
])
def test_bound_exactly_at_the_margin_fails(metric, inc, cand):
    r = screen(constant_pairs({"m": inc}, {"m": cand}), [metric])
    m = r["metrics"][0]
    assert m["bound"] == m["threshold"]
    assert m["passed"] is False and r["verdict"] == "fail"
    assert "is not" in r["reasons"][0]
    wider = screen(constant_pairs({"m": inc}, {"m": cand}), [{**metric, "margin": metric["margin"] * 1.001}])
    assert wider["verdict"] == "pass"


def test_ratio_threshold_and_failure_named():
    r = screen(constant_pairs({"length": 10.0}, {"length": 12.0}), [LENGTH])
    m = r["metrics"][0]
    assert m["threshold"] == pytest.approx(1.1) and m["estimate"] == pytest.approx(1.2) and m["passed"] is False
    assert r["verdict"] == "fail" and r["reasons"][0].startswith("metric length: upper bound 1.2")


# --- agreement with independent implementations ----------------------------------------------------

def _mc_tolerance(stats: np.ndarray, resamples: int) -> np.ndarray:
    # Standard error of a 5%/95% sample quantile of a near-normal distribution is about
    # sd * sqrt(p(1-p)/B) / phi(z_p) = 2.11 sd / sqrt(B); two independent estimates differ by
    # sqrt(2) of that. Five of those is far beyond chance and far below any real disagreement.
    return 5 * math.sqrt(2) * 2.11 * stats.std(axis=0) / math.sqrt(resamples)


@pytest.mark.parametrize("uneven", [False, True])
def test_two_level_bounds_agree_with_plain_python_reference(uneven):
    pairs = noisy_pairs(30, 4, seed=5, uneven=uneven)
    metrics = [RECALL, UNSUPPORTED, LENGTH]
    b = 4000
    fast = screen(pairs, metrics, resamples=b)
    ref = reference_bounds({"metrics": metrics, "pairs": pairs}, b, seed=99)
    names = [m["name"] for m in metrics]
    sizes = np.unique([p["case"] for p in pairs], return_counts=True)[1]
    data = PairedData(sizes, np.array([[p["candidate"][n] for n in names] for p in pairs]),
                      np.array([[p["incumbent"][n] for n in names] for p in pairs]),
                      np.array([m["kind"] == "ratio" for m in metrics]))
    tol = _mc_tolerance(resample_statistics(data, b, seed=1), b)
    for j, m in enumerate(fast["metrics"]):
        assert abs(m["bound"] - ref[m["name"]]) < tol[j], (m["name"], m["bound"], ref[m["name"]], tol[j])
    assert fast["counts"]["cases"] == 30 and fast["counts"]["pairs_used"] == len(pairs)


def test_two_level_is_wider_than_single_level_when_variants_correlate():
    # Variants of a case share its level; resampling cases is what captures that. A bootstrap that
    # treated variants as independent would give a tighter (too optimistic) bound.
    rnd = random.Random(3)
    pairs = []
    for c in range(20):
        shift = rnd.gauss(0, 0.05)
        pairs += [{"case": c, "variant": v, "incumbent": {"recall": 0.5},
                   "candidate": {"recall": 0.5 + shift + rnd.gauss(0, 0.005)}} for v in range(5)]
    two = screen(pairs, [RECALL], resamples=4000)["metrics"][0]["bound"]
    flat = screen([{**p, "case": i} for i, p in enumerate(pairs)], [RECALL], resamples=4000)["metrics"][0]["bound"]
    assert two < flat - 0.005


def test_single_level_mean_difference_agrees_with_scipy_percentile_bootstrap():
    rnd = random.Random(8)
    diffs = [rnd.gauss(-0.004, 0.03) for _ in range(60)]
    pairs = [{"case": i, "variant": 0, "incumbent": {"recall": 0.5}, "candidate": {"recall": 0.5 + d}}
             for i, d in enumerate(diffs)]
    b = 8000
    ours = screen(pairs, [RECALL], resamples=b)["metrics"][0]["bound"]
    sp = scipy.stats.bootstrap((np.array(diffs),), np.mean, n_resamples=b, method="percentile",
                               confidence_level=0.95, alternative="greater", rng=np.random.default_rng(4))
    sd = sp.standard_error
    assert abs(ours - sp.confidence_interval.low) < 5 * math.sqrt(2) * 2.11 * sd / math.sqrt(b)
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == float(np.quantile([3.0, 1.0, 2.0, 4.0], 0.5)) == 2.5


def test_same_seed_same_record_other_seed_other_bounds():
    pairs = noisy_pairs(25, 3, seed=2)
    a, b = screen(pairs, [RECALL, LENGTH]), screen(pairs, [RECALL, LENGTH])
    c = screen(pairs, [RECALL, LENGTH], seed=12)
    assert a == b
    assert a["metrics"][0]["bound"] != c["metrics"][0]["bound"]


# --- validity rules ---------------------------------------------------------------------------------

def test_error_rate_at_one_percent_is_valid_above_is_inconclusive():
    pairs = constant_pairs({"recall": 0.5}, {"recall": 0.5}, cases=50, variants=2)
    pairs[0]["error"] = True
    assert screen(pairs, [RECALL])["verdict"] == "pass"  # 1 of 100
    pairs[1]["error"] = True
    r = screen(pairs, [RECALL])
    assert r["verdict"] == "inconclusive" and "error rate 0.0200 exceeds 0.01" in r["reasons"][0]
    assert r["metrics"][0]["passed"] is None and r["counts"]["errors"] == 2


@pytest.mark.parametrize("extra, reason", [
    ({"determinism_passed": False}, "determinism rerun not passed"),
    ({"min_perturbed_cases": 13}, "only 12 perturbed case(s)"),
    ({"expected_pairs": 40}, "incomplete: 36 pairs, expected 40"),
])
def test_validity_failures_give_inconclusive(extra, reason):
    r = screen(constant_pairs({"recall": 0.5}, {"recall": 0.5}), [RECALL], **extra)
    assert r["verdict"] == "inconclusive" and any(reason in x for x in r["reasons"]), r["reasons"]


def test_determinism_result_absent_is_inconclusive():
    data = {"metrics": [RECALL], "pairs": constant_pairs({"recall": 0.5}, {"recall": 0.5}), "resamples": 200,
            "min_perturbed_cases": 0}
    r = judge_noninferiority(data)
    assert r["verdict"] == "inconclusive" and r["reasons"] == ["determinism rerun result not supplied"]


def test_missing_metric_value_makes_metric_not_evaluable():
    pairs = constant_pairs({"recall": 0.5, "length": 3.0}, {"recall": 0.5, "length": 3.0})
    del pairs[4]["candidate"]["length"]
    r = screen(pairs, [RECALL, LENGTH])
    assert r["verdict"] == "inconclusive"
    assert r["reasons"] == ["metric length not evaluable: 1 value(s) missing in error-free pairs (incomplete)"]
    assert [m["evaluable"] for m in r["metrics"]] == [True, False]


def test_ratio_with_zero_incumbent_is_not_evaluable():
    r = screen(constant_pairs({"length": 0.0}, {"length": 1.0}), [LENGTH])
    assert r["verdict"] == "inconclusive" and "not evaluable" in r["reasons"][0]


def test_ratio_resample_with_zero_denominator_is_not_evaluable():
    pairs = constant_pairs({"length": 0.0}, {"length": 1.0}, cases=3, variants=1)
    pairs[0]["incumbent"]["length"] = 1.0  # total > 0, but some resamples draw only zero cases
    r = screen(pairs, [LENGTH])
    assert r["verdict"] == "inconclusive" and "bound is not finite" in r["reasons"][0]


def test_record_holds_counts_and_digests_never_prompts_or_outputs():
    pairs = constant_pairs({"recall": 0.5}, {"recall": 0.5})
    for p in pairs:
        p["prompt"] = "SECRET PROMPT TEXT"
        p["output"] = "SECRET OUTPUT TEXT"
    r = screen(pairs, [RECALL], candidate=CANDIDATE)
    import json
    text = json.dumps(r)
    assert "SECRET" not in text and "pairs" not in r
    assert r["candidate"] == CANDIDATE and len(r["input_sha256"]) == 64 and len(r["code_sha256"]) == 64
    assert r["parameters"]["seed"] == 11 and r["parameters"]["resamples"] == 2000
    assert "two-level cluster bootstrap" in r["parameters"]["bootstrap"]
    assert r["counts"] == {"pairs": 36, "errors": 0, "error_rate": 0.0, "pairs_used": 36, "cases": 12, "perturbed_cases": 12}


@pytest.mark.parametrize("mutate, path", [
    (lambda d: d["metrics"][0].update(margin=-0.02), "$.metrics[0].margin"),
    (lambda d: d["metrics"].append({**LENGTH, "margin": 1.10}), "$.metrics[1].margin"),
    (lambda d: d["metrics"][0].update(better="up"), "$.metrics[0].better"),
    (lambda d: d["pairs"].append(dict(d["pairs"][0])), "$.pairs[36]"),
    (lambda d: d["pairs"][3]["candidate"].update(recall="high"), "$.pairs[3].candidate.recall"),
    (lambda d: d.update(resamples=10), "$.resamples"),
])
def test_bad_input_names_the_json_path(mutate, path):
    data = {"metrics": [dict(RECALL)], "pairs": constant_pairs({"recall": 0.5}, {"recall": 0.5}),
            "determinism_passed": True}
    mutate(data)
    with pytest.raises(InputError) as exc:
        judge_noninferiority(data, source="ni.json")
    assert exc.value.path == path, exc.value


def test_errored_pair_needs_no_metrics_but_a_measured_pair_does():
    pairs = constant_pairs({"recall": 0.5}, {"recall": 0.5}, cases=50, variants=2)
    r = screen(pairs + [{"case": "x", "variant": 0, "error": True}], [RECALL])
    assert r["verdict"] == "pass" and r["counts"]["errors"] == 1 and r["counts"]["cases"] == 50
    with pytest.raises(InputError) as exc:
        screen(pairs + [{"case": "x", "variant": 0}], [RECALL])
    assert exc.value.path == "$.pairs[100]" and "required" in exc.value.message
