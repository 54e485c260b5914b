"""Slow, plain-Python reference of the two-level cluster bootstrap, written independently of
bootstrap.py (own grouping, own random stream, own quantile) to check it within Monte Carlo error."""

from __future__ import annotations

import math
import random


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default 'linear' method)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def reference_statistics(data: dict, resamples: int, seed: int) -> dict[str, list[float]]:
    """Per metric name, the statistic of each resample, from a non-inferiority input dict."""
    metrics = data["metrics"]
    cases: dict = {}
    for p in data["pairs"]:
        if not p.get("error", False):
            cases.setdefault(p["case"], []).append(p)
    groups = list(cases.values())
    rnd = random.Random(seed)
    out: dict[str, list[float]] = {m["name"]: [] for m in metrics}
    for _ in range(resamples):
        num = {m["name"]: 0.0 for m in metrics}
        den = {m["name"]: 0.0 for m in metrics}
        count = 0
        for _ in range(len(groups)):
            group = groups[rnd.randrange(len(groups))]
            for _ in range(len(group)):
                pair = group[rnd.randrange(len(group))]
                count += 1
                for m in metrics:
                    name = m["name"]
                    if m["kind"] == "difference":
                        num[name] += pair["candidate"][name] - pair["incumbent"][name]
                    else:
                        num[name] += pair["candidate"][name]
                        den[name] += pair["incumbent"][name]
        for m in metrics:
            name = m["name"]
            out[name].append(num[name] / count if m["kind"] == "difference" else num[name] / den[name])
    return out


def reference_bounds(data: dict, resamples: int, seed: int, confidence: float = 0.95) -> dict[str, float]:
    """One-sided percentile bound per metric: lower for higher-better, upper for lower-better."""
    stats = reference_statistics(data, resamples, seed)
    return {m["name"]: quantile(stats[m["name"]], 1 - confidence if m["better"] == "higher" else confidence)
            for m in data["metrics"]}
