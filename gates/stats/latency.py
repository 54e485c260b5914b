"""Latency-parity judge: candidate <= incumbent + max(absolute, relative x incumbent) at every position."""

from __future__ import annotations

import numpy as np

from gates.stats.inputs import check_input, require_unique
from gates.stats.records import make_verdict

DEFAULT_ABSOLUTE_S = 0.25
DEFAULT_RELATIVE = 0.25


def judge_latency(data: dict, *, source: str = "<input>") -> dict:
    """Margin per position = allowance - candidate (>= 0 passes, equality passes); the worst is the smallest."""
    check_input("latency", data, source)
    absolute = float(data.get("absolute_s", DEFAULT_ABSOLUTE_S))
    relative = float(data.get("relative", DEFAULT_RELATIVE))
    positions = data["positions"]
    require_unique(positions, lambda p: p["id"], "$.positions", source)
    reasons: list[str] = []
    if not positions:
        reasons.append("no positions")
    unmeasured = [p["id"] for p in positions if p["incumbent_s"] is None or p["candidate_s"] is None]
    if unmeasured:
        reasons.append(f"{len(unmeasured)} position(s) not measured, first {unmeasured[0]}")

    inc = np.array([np.nan if p["incumbent_s"] is None else p["incumbent_s"] for p in positions], float)
    cand = np.array([np.nan if p["candidate_s"] is None else p["candidate_s"] for p in positions], float)
    allowed = inc + np.maximum(absolute, relative * inc)
    margin = allowed - cand
    over = np.flatnonzero(cand > allowed)  # NaN compares False: unmeasured never counts as over
    rows = [{"id": p["id"], "incumbent_s": p["incumbent_s"], "candidate_s": p["candidate_s"],
             "allowed_s": None if np.isnan(allowed[i]) else float(allowed[i]),
             "margin_s": None if np.isnan(margin[i]) else float(margin[i]),
             "passed": None if np.isnan(margin[i]) else bool(cand[i] <= allowed[i])}
            for i, p in enumerate(positions)]
    measured = np.flatnonzero(~np.isnan(margin))
    worst = None
    if measured.size:
        i = int(measured[np.argmin(margin[measured])])
        worst = {"id": positions[i]["id"], "margin_s": float(margin[i])}

    if over.size:
        verdict = "fail"
        reasons = [f"position {positions[i]['id']}: candidate {cand[i]:.4f} s exceeds allowed {allowed[i]:.4f} s"
                   for i in over] + reasons
    else:
        verdict = "inconclusive" if reasons else "pass"
    body = {
        "parameters": {"absolute_s": absolute, "relative": relative,
                       "rule": "candidate_s <= incumbent_s + max(absolute_s, relative * incumbent_s); equality passes"},
        "counts": {"positions": len(positions), "measured": int(measured.size), "over": int(over.size)},
        "positions": rows,
        "worst": worst,
    }
    return make_verdict("verdict-latency", data, verdict, reasons, body)
