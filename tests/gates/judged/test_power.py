"""The power figures stated for each size follow from their formula."""

import math

from scipy.stats import norm

from gates.judged.power import screen_power
from gates.judged.settings import resolve


def test_cpu_size_figures():
    """The CPU size of gates/judged/settings.py (8 cases x 2 variants) and the figures docs/STATISTICS.md states."""
    s = resolve("cpu")["noninferiority"]
    p = screen_power(s["cases"], s["variants"])
    se = 0.15 * math.sqrt(1.5 / 16)
    assert p["pairs"] == 16 and p["standard_error"] == round(se, 5) == 0.04593
    assert p["pass_probability_if_equal"] == round(norm.cdf(0.02 / se - norm.ppf(0.95)), 4) == 0.1133
    assert p["single_pair_shift"] == 0.0625 and p["single_pair_shift_fails"] is True


def test_full_size_is_tighter_than_cpu():
    full, cpu = screen_power(140, 8), screen_power(8, 2)
    assert full["pairs"] == 1120 and full["standard_error"] < cpu["standard_error"]
    assert full["pass_probability_if_equal"] > cpu["pass_probability_if_equal"]
    assert full["single_pair_shift_fails"] is False
