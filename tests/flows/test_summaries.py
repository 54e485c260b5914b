"""The approval summary a person reads before deciding: each lane's phases with status and figures."""

from flows.summaries import manifest_md

MANIFEST = {"version": "1.0", "state": "ready", "candidate": {"commit": "a" * 40, "tree": "b" * 40, "id": "c" * 64},
            "receipts": [{"kind": "verdict-abba", "label": "cpu-reference", "sha256": "d" * 64}],
            "artifacts": [], "sboms": [], "waivers": []}
LANE = {"lane": "cpu-reference", "kind": "cpu-reference", "verdict": "fail",
        "phases": [{"name": "context", "status": "pass", "facts": {"seconds": 97.9}},
                   {"name": "security", "status": "fail", "facts": {"seconds": 5.3, "reason": "key file | loose"}}]}


def test_the_summary_lists_each_lanes_phases_and_the_receipts_with_kind_and_label():
    text = manifest_md(MANIFEST, "ledger: closed", [LANE])
    assert "### Lane cpu-reference (cpu-reference): fail" in text
    assert "| context | pass | 97.9 |  |" in text
    assert "| security | fail | 5.3 | key file \\| loose |" in text
    assert "| verdict-abba | cpu-reference | `dddddddddddddddd` |" in text
    assert text.rstrip().endswith("ledger: closed")


def test_a_gate_failure_names_the_gate_the_case_and_the_measured_value_weighted_first():
    from flows.summaries import gate_failure

    verdict = {"kind": "verdict-abba", "verdict": "fail", "reasons": ["weighted ratio 0.9012 below min_ratio 0.97"],
               "judged": {"findings": [{"case": "short-32", "measured": "0.9300"},
                                       {"case": "weighted", "measured": "0.9012"}]}}
    text = gate_failure("cpu-reference", [verdict])
    assert text.startswith("lane cpu-reference: verdict-abba is fail (case weighted measured 0.9012, "
                           "case short-32 measured 0.9300: weighted ratio 0.9012 below min_ratio 0.97)")
