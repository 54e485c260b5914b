"""Waivers of judged verdicts: a waiver applies only to exactly the failure it names.

A waiver (a gate-scoped record as `releases.waivers.build_gate_waiver` writes it, its signature
checked by the caller against the listed grantors, or any mapping with the same fields) names the
gate (`abba` or `verdict-abba`), the lane, the case (or position, or metric; `subject` is read
when `case` is absent), the measured value, and the candidate. It applies to a verdict when all
of these equal a finding of that verdict on that lane: a waiver for another case, another gate,
another lane, another candidate or a different measurement never applies. A measured number is
compared at four decimals (the precision findings are written with).
"""

from __future__ import annotations

from typing import Any

from releases.canonical import digest


def _gate(value: Any) -> str:
    text = str(value or "")
    return text if text.startswith("verdict-") else f"verdict-{text}"


def _measured(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return f"{value:.4f}"
    return str(value).strip()


def why_not(waiver: dict, verdict: dict, lane: str) -> str | None:
    """None when the waiver applies to a finding of this verdict on this lane, else the reason."""
    if not isinstance(waiver, dict):
        return "not a waiver record"
    judged = verdict.get("judged", {})
    if waiver.get("scope", "gate") != "gate":
        return f"scope {waiver.get('scope')!r} is not a gate waiver"
    if _gate(waiver.get("gate")) != verdict.get("kind"):
        return f"names gate {waiver.get('gate')!r}, not {verdict.get('kind')}"
    if waiver.get("lane") != lane or judged.get("lane") != lane:
        return f"names lane {waiver.get('lane')!r}, not {lane!r}"
    mine, theirs = verdict.get("candidate"), waiver.get("candidate")
    if (mine is None) != (theirs is None) or (mine is not None and (theirs or {}).get("id") != mine.get("id")):
        return "names another candidate"
    case = waiver.get("case", waiver.get("subject"))
    findings = [f for f in judged.get("findings", []) if f["case"] == case]
    if not findings:
        return f"verdict has no finding for case {case!r}"
    measured = _measured(waiver.get("measured"))
    if not any(f["measured"] == measured for f in findings):
        return f"measured {measured!r} is not the verdict's {findings[0]['measured']!r} for case {case!r}"
    if not waiver.get("approved_by"):
        return "names no approver"
    return None


def applies(waiver: dict, verdict: dict, lane: str) -> bool:
    """True when the waiver names exactly this verdict's gate, lane, candidate, a case and its measured value."""
    return why_not(waiver, verdict, lane) is None


def apply_waivers(verdict: dict, waivers: list[dict], lane: str) -> dict:
    """Record each waiver's digest and whether it applied; the verdict stops blocking only when
    every finding is covered by an applied waiver. Returns the verdict (updated in place)."""
    judged = verdict["judged"]
    entries, covered = [], set()
    for w in waivers:
        note = why_not(w, verdict, lane)
        entries.append({"sha256": digest(w), "id": str(w.get("id", "")) if isinstance(w, dict) else "",
                        "applied": note is None, "note": note or "applied"})
        if note is None:
            covered.add((w.get("case", w.get("subject")), _measured(w.get("measured"))))
    judged["waivers"] = entries
    open_findings = [f for f in judged["findings"] if (f["case"], f["measured"]) not in covered]
    judged["blocking"] = verdict["verdict"] != "pass" and bool(open_findings or not judged["findings"])
    return verdict


def blocks(verdict: dict) -> bool:
    """Whether this verdict blocks its lane (fail or inconclusive, not every finding waived)."""
    return bool(verdict["judged"]["blocking"])
