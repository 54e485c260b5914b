"""Non-inferiority quality screen: one-sided bootstrap bounds of paired metrics against margins."""

from __future__ import annotations

from typing import Any

import numpy as np

from gates.stats.bootstrap import SCHEME, PairedData, block_size, one_sided_bounds, point_estimate, resample_statistics
from gates.stats.inputs import check_input, require_unique
from gates.stats.records import make_verdict

DEFAULTS = {"seed": 0, "resamples": 20000, "confidence": 0.95, "max_error_rate": 0.01, "min_perturbed_cases": 10}
TIE_RULE = ("strict: higher-better passes only when lower bound > threshold, lower-better only when "
            "upper bound < threshold; a bound equal to the threshold fails")


def threshold(metric: dict) -> float:
    """difference: -margin (higher better) or +margin (lower better); ratio: 1 -/+ margin."""
    sign = -1.0 if metric["better"] == "higher" else 1.0
    base = 1.0 if metric["kind"] == "ratio" else 0.0
    return base + sign * float(metric["margin"])


def _group(pairs: list[dict]) -> tuple[list[Any], list[list[dict]]]:
    order: dict[Any, list[dict]] = {}
    for p in pairs:
        order.setdefault(p["case"], []).append(p)
    return list(order), list(order.values())


def judge_noninferiority(data: dict, *, source: str = "<input>") -> dict:
    """Judge a non-inferiority input (see input-noninferiority.schema.json); returns a verdict record."""
    check_input("noninferiority", data, source)
    cfg = {k: data.get(k, v) for k, v in DEFAULTS.items()}
    metrics, pairs = data["metrics"], data["pairs"]
    require_unique(metrics, lambda m: m["name"], "$.metrics", source)
    require_unique(pairs, lambda p: (p["case"], p["variant"]), "$.pairs", source)

    reasons: list[str] = []
    total = len(pairs)
    used = [p for p in pairs if not p.get("error", False)]
    errors = total - len(used)
    if total == 0:
        reasons.append("no pairs")
    expected = data.get("expected_pairs")
    if expected is not None and total != expected:
        reasons.append(f"incomplete: {total} pairs, expected {expected}")
    error_rate = errors / total if total else None
    if error_rate is not None and error_rate > cfg["max_error_rate"]:
        reasons.append(f"error rate {error_rate:.4f} exceeds {cfg['max_error_rate']:g} ({errors} of {total} pairs)")
    if data.get("determinism_passed") is not True:
        reasons.append("determinism rerun not passed" if "determinism_passed" in data
                       else "determinism rerun result not supplied")

    case_ids, groups = _group(used)
    sizes = np.array([len(g) for g in groups], dtype=np.intp)
    perturbed = int((sizes >= 2).sum())
    if perturbed < cfg["min_perturbed_cases"]:
        reasons.append(f"only {perturbed} perturbed case(s) (>= 2 error-free variants), need {cfg['min_perturbed_cases']}")

    ordered = [p for g in groups for p in g]
    names = [m["name"] for m in metrics]

    def column(side: str, name: str) -> np.ndarray:
        return np.array([np.nan if p[side].get(name) is None else p[side][name] for p in ordered], float)

    cand = np.column_stack([column("candidate", n) for n in names]) if ordered else np.empty((0, len(names)))
    inc = np.column_stack([column("incumbent", n) for n in names]) if ordered else np.empty((0, len(names)))
    is_ratio = np.array([m["kind"] == "ratio" for m in metrics])
    evaluable = np.ones(len(metrics), bool)
    for j, m in enumerate(metrics):
        missing = int(np.isnan(cand[:, j]).sum() + np.isnan(inc[:, j]).sum())
        if not ordered:
            why = "no error-free pairs"
        elif missing:
            why = f"{missing} value(s) missing in error-free pairs (incomplete)"
        elif is_ratio[j] and ((cand[:, j] < 0).any() or (inc[:, j] < 0).any() or inc[:, j].sum() <= 0):
            why = "a ratio metric needs non-negative values and a positive incumbent total"
        else:
            continue
        evaluable[j] = False
        reasons.append(f"metric {m['name']} not evaluable: {why}")

    estimates = np.full(len(metrics), np.nan)
    bounds = np.full(len(metrics), np.nan)
    lower = np.array([m["better"] == "higher" for m in metrics])
    if evaluable.any():
        sub = PairedData(sizes, cand[:, evaluable], inc[:, evaluable], is_ratio[evaluable])
        stats = resample_statistics(sub, int(cfg["resamples"]), int(cfg["seed"]))
        estimates[evaluable] = point_estimate(sub)
        bounds[evaluable] = one_sided_bounds(stats, float(cfg["confidence"]), lower[evaluable])
        for j in np.flatnonzero(evaluable & ~np.isfinite(bounds)):
            evaluable[j] = False
            reasons.append(f"metric {metrics[j]['name']} not evaluable: bootstrap bound is not finite "
                           "(a resample has no incumbent total, or the values overflow a float)")

    valid = not reasons
    results = []
    for j, m in enumerate(metrics):
        t = threshold(m)
        ok = None
        if valid:
            ok = bool(bounds[j] > t) if lower[j] else bool(bounds[j] < t)
        results.append({
            "name": m["name"], "kind": m["kind"], "better": m["better"], "margin": float(m["margin"]),
            "threshold": t, "bound_side": "lower" if lower[j] else "upper",
            "estimate": float(estimates[j]) if np.isfinite(estimates[j]) else None,
            "bound": float(bounds[j]) if evaluable[j] else None,
            "evaluable": bool(evaluable[j]), "passed": ok})
        if ok is False:
            rel = ">" if lower[j] else "<"
            reasons.append(f"metric {m['name']}: {results[-1]['bound_side']} bound {bounds[j]:.6g} "
                           f"is not {rel} threshold {t:g}")
    verdict = "inconclusive" if not valid else "fail" if reasons else "pass"

    body = {
        "parameters": {**cfg, "bootstrap": SCHEME, "block": block_size(sizes) if len(sizes) else None,
                       "rng": "numpy PCG64 (default_rng(seed))", "statistic":
                       "difference: mean(candidate - incumbent) over pairs; ratio: sum(candidate)/sum(incumbent)",
                       "tie_rule": TIE_RULE},
        "counts": {"pairs": total, "errors": errors, "error_rate": error_rate, "pairs_used": len(used),
                   "cases": len(case_ids), "perturbed_cases": perturbed},
        "metrics": results,
    }
    return make_verdict("verdict-noninferiority", data, verdict, reasons, body)
