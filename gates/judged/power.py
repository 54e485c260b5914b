"""What a size of the quality screen can detect: a normal approximation, stated in every record.

For a difference metric the screen fails when the one-sided 95% bootstrap bound crosses the
margin. With n pairs in K cases of m variants, per-pair standard deviation sd of the paired
difference and intra-case correlation icc, the standard error of the mean difference is
sd * sqrt((1 + (m - 1) * icc) / n) (the cluster design effect). Then

  P(pass | no change)             = Phi(margin / se - z95)
  degradation failed with 80%     = margin - (z95 - z80) * se   (wider when se is large)
  one pair's full-point change    = 1 / n   (fails the screen on its own when > margin)

sd = 0.15 and icc = 0.5 are planning values for 0/1 metrics on which about one pair in forty
differs between two engines; greedy outputs of engines that agree make sd much smaller.
"""

from __future__ import annotations

import math

from scipy.stats import norm

PLANNING_SD = 0.15
PLANNING_ICC = 0.5
MARGIN = 0.02  # the tightest difference margin of the nine metrics


def screen_power(cases: int, variants: int, *, confidence: float = 0.95, margin: float = MARGIN,
                 sd: float = PLANNING_SD, icc: float = PLANNING_ICC) -> dict:
    """The power figures of a size (see the module docstring)."""
    n = cases * variants
    deff = 1 + (variants - 1) * icc
    se = sd * math.sqrt(deff / n)
    z = norm.ppf(confidence)
    z80 = norm.ppf(0.80)
    return {
        "pairs": n, "cases": cases, "variants": variants, "margin": margin, "confidence": confidence,
        "planning_sd": sd, "planning_icc": icc, "design_effect": round(deff, 4), "standard_error": round(se, 5),
        "pass_probability_if_equal": round(float(norm.cdf(margin / se - z)), 4),
        "degradation_failed_80": round(margin - (z - z80) * se, 5),
        "single_pair_shift": round(1 / n, 5),
        "single_pair_shift_fails": 1 / n > margin,
        "method": "normal approximation with cluster design effect; see gates/judged/power.py",
    }
