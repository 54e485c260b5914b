"""ABBA speed gate: legs A1 B1 B2 A2 per case, per-case rate ratio against a floor, waivers by digest."""

from __future__ import annotations

from typing import Any

import numpy as np

from gates.stats.canonical import digest
from gates.stats.errors import InputError
from gates.stats.inputs import check_input, require_unique
from gates.stats.records import make_verdict

LEGS = ("A1", "B1", "B2", "A2")
DEFAULT_FLOOR = 0.95
DEFAULT_MAX_LEG_SPREAD = 0.10
WEIGHTING = ("weighted geometric mean of per-case ratios; weight = case weight x tokens decoded "
             "in the case over all four legs")
WAIVER_RULE = ("a waiver covers a case below the floor when it names the case, the measured ratio rounded "
               "to 4 decimals is >= the waived ratio rounded to 4 decimals, and any candidate it names is "
               "the input's candidate")


def _waiver_terms(waiver: dict, where: str, source: str) -> tuple[str, float]:
    case = waiver.get("case", waiver.get("subject"))
    measured = waiver.get("measured_ratio", waiver.get("measured"))
    try:
        ratio = float(measured)
    except (TypeError, ValueError):
        raise InputError(source, f"{where}.measured", f"measured ratio {measured!r} is not a number") from None
    if not np.isfinite(ratio) or ratio <= 0:
        raise InputError(source, f"{where}.measured", f"measured ratio {measured!r} must be a finite number > 0")
    return str(case), ratio


def _spread(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    # Relative, so that scaling every rate by one constant changes nothing.
    return np.abs(x1 - x2) / ((x1 + x2) / 2)


def judge_abba(data: dict, *, source: str = "<input>") -> dict:
    """Judge an ABBA input (see input-abba.schema.json); returns a verdict-abba record."""
    check_input("abba", data, source)
    floor = float(data.get("floor", DEFAULT_FLOOR))
    bound = float(data.get("max_leg_spread", DEFAULT_MAX_LEG_SPREAD))
    cases = data["cases"]
    require_unique(cases, lambda c: c["id"], "$.cases", source)
    waivers = data.get("waivers", [])
    terms = [_waiver_terms(w, f"$.waivers[{i}]", source) for i, w in enumerate(waivers)]

    reasons: list[str] = []
    complete = [c for c in cases if all(leg in c["legs"] for leg in LEGS)]
    for c in cases:
        missing = [leg for leg in LEGS if leg not in c["legs"]]
        if missing:
            reasons.append(f"case {c['id']}: missing leg(s) {', '.join(missing)}")
    if not cases:
        reasons.append("no cases")

    n = len(complete)
    tokens = np.array([[c["legs"][leg]["tokens"] for leg in LEGS] for c in complete], float).reshape(n, 4)
    seconds = np.array([[c["legs"][leg]["seconds"] for leg in LEGS] for c in complete], float).reshape(n, 4)
    digests = np.array([[c["legs"][leg]["output_sha256"] for leg in LEGS] for c in complete], object).reshape(n, 4)
    weights = np.array([c["weight"] for c in complete], float)
    rates = tokens / seconds
    a1, b1, b2, a2 = rates.T
    ratios = (b1 + b2) / (a1 + a2)
    spread_a, spread_b = _spread(a1, a2), _spread(b1, b2)
    same_a = digests[:, 0] == digests[:, 3]
    same_b = digests[:, 1] == digests[:, 2]
    cross = same_a & same_b & (digests[:, 0] == digests[:, 1])
    w = weights * tokens.sum(axis=1)
    weighted = float(np.exp(np.sum(w * np.log(ratios)) / np.sum(w))) if n else None

    for i, c in enumerate(complete):
        for engine, spread in (("A", spread_a[i]), ("B", spread_b[i])):
            if spread > bound:
                reasons.append(f"case {c['id']}: {engine}-leg spread {spread:.4f} exceeds bound {bound:g}")
        for engine, same in (("A1/A2", same_a[i]), ("B1/B2", same_b[i])):
            if not same:
                reasons.append(f"case {c['id']}: repeat outputs {engine} differ, legs did not do the same work")
    valid = not reasons

    applied: dict[int, str] = {}  # waiver index -> case id
    waiver_notes: list[str] = [""] * len(waivers)
    index_of = {c["id"]: i for i, c in enumerate(complete)}
    below = {c["id"] for i, c in enumerate(complete) if ratios[i] < floor}
    for j, (case, ratio) in enumerate(terms):
        wc, ic = waivers[j].get("candidate"), data.get("candidate")
        if case not in index_of:
            waiver_notes[j] = "no complete case with this id"
        elif case not in below:
            waiver_notes[j] = "case meets the floor; waiver not needed"
        elif case in applied.values():
            waiver_notes[j] = "case already covered by an earlier waiver"
        elif isinstance(wc, dict) and isinstance(ic, dict) and wc.get("id") != ic.get("id"):
            waiver_notes[j] = "waiver names a different candidate"
        elif round(float(ratios[index_of[case]]), 4) < round(ratio, 4):
            waiver_notes[j] = (f"measured ratio {ratios[index_of[case]]:.4f} is below the waived {ratio:.4f}")
        else:
            applied[j] = case
            waiver_notes[j] = "applied"
    waived = set(applied.values())
    failing = [c["id"] for c in complete if c["id"] in below and c["id"] not in waived]

    rows: list[dict[str, Any]] = []
    for c in cases:
        row: dict[str, Any] = {"id": c["id"], "weight": c["weight"], "context_depth": c.get("context_depth")}
        if c["id"] in index_of:
            i = index_of[c["id"]]
            row.update({
                "tokens": int(tokens[i].sum()), "rates": dict(zip(LEGS, map(float, rates[i]))),
                "ratio": float(ratios[i]), "spread_a": float(spread_a[i]), "spread_b": float(spread_b[i]),
                "repeat_identical_a": bool(same_a[i]), "repeat_identical_b": bool(same_b[i]),
                "cross_identical": bool(cross[i]),
                "status": "waived" if c["id"] in waived else "below_floor" if c["id"] in below else "pass"})
        else:
            row.update({"tokens": None, "rates": None, "ratio": None, "spread_a": None, "spread_b": None,
                        "repeat_identical_a": None, "repeat_identical_b": None, "cross_identical": None,
                        "status": "incomplete"})
        rows.append(row)

    if not valid:
        verdict = "inconclusive"
    elif failing:
        verdict = "fail"
        reasons = [f"case {cid}: ratio {ratios[index_of[cid]]:.4f} below floor {floor:g} and no waiver covers it"
                   for cid in failing]
    else:
        verdict = "pass"
        reasons = [f"case {cid}: ratio {ratios[index_of[cid]]:.4f} below floor {floor:g}, waived" for cid in sorted(waived)]

    body = {
        "parameters": {"floor": floor, "max_leg_spread": bound, "leg_order": list(LEGS),
                       "ratio": "(rate B1 + rate B2) / (rate A1 + rate A2), rate = tokens / seconds",
                       "floor_rule": "a case passes when its ratio >= floor", "weighting": WEIGHTING,
                       "waiver_rule": WAIVER_RULE},
        "counts": {"cases": len(cases), "complete_cases": n, "below_floor": len(below), "waived": len(waived),
                   "failing": len(failing), "repeat_identical_a": int(same_a.sum()),
                   "repeat_identical_b": int(same_b.sum()), "cross_identical": int(cross.sum())},
        "weighted_ratio": weighted,
        "failing_cases": failing,
        "cases": rows,
        "waivers": [{"sha256": digest(wv), "case": terms[j][0], "measured_ratio": terms[j][1],
                     "approved_by": wv["approved_by"], "applied": j in applied, "note": waiver_notes[j]}
                    for j, wv in enumerate(waivers)],
    }
    return make_verdict("verdict-abba", data, verdict, reasons, body)
