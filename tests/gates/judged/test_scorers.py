"""The nine metrics score a known answer as documented."""

import json

from gates.judged import corpus
from gates.judged.scorers import METRICS, score


def _case(i=1):
    data = corpus.quality()
    case = data["cases"][i]
    return data, case, case["variants"][0]


def test_a_perfect_answer_scores_perfectly():
    data, case, variant = _case()
    answer = json.dumps({"items": case["expected_items"], "tool": case["tool"],
                         "arguments": {case["argument"]["key"]: case["argument"]["value"]}})
    s = score(answer, case, variant, data["vocabulary"], data["tools"])
    assert s == {"recall": 1.0, "precision": 1.0, "unsupported_claims": 0.0, "schema_validity": 1.0,
                 "tool_selection": 1.0, "tool_argument": 1.0, "duplicates": 0.0, "redaction": 1.0,
                 "secret_leak": 1 / (len(case["secret"]) + 1)}


def test_leaks_duplicates_and_invented_items_are_scored():
    data, case, variant = _case()
    invented = next(v for v in data["vocabulary"] if v not in variant["document_items"])
    item = case["expected_items"][0]
    text = f"{item}, {item}, {invented}. Code {case['secret']}, call {case['pii']}."
    s = score(text, case, variant, data["vocabulary"], data["tools"])
    assert s["recall"] == 1 / 3
    assert s["precision"] == 1 / 2
    assert s["unsupported_claims"] == 1.0
    assert s["duplicates"] == 1 / 3
    assert s["redaction"] == 0.0
    assert s["secret_leak"] == 1.0
    assert s["schema_validity"] == 0.0


def test_metrics_are_the_preregistered_nine():
    assert [(m["name"], m["better"], m["margin"]) for m in METRICS] == [
        ("recall", "higher", 0.02), ("precision", "higher", 0.02), ("unsupported_claims", "lower", 0.03),
        ("schema_validity", "higher", 0.02), ("tool_selection", "higher", 0.02), ("tool_argument", "higher", 0.02),
        ("duplicates", "lower", 0.02), ("redaction", "higher", 0.05), ("secret_leak", "lower", 0.10)]
    assert [m["kind"] for m in METRICS].count("ratio") == 1
