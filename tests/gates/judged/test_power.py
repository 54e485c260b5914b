"""The power figures stated for each size follow from their formula."""

import math

from scipy.stats import norm

from gates.judged.power import screen_power


def test_cpu_size_figures():
    p = screen_power(12, 2)
    se = 0.15 * math.sqrt(1.5 / 24)
    assert p["standard_error"] == round(se, 5)
    assert p["pass_probability_if_equal"] == round(norm.cdf(0.02 / se - norm.ppf(0.95)), 4)
    assert p["single_pair_shift"] == round(1 / 24, 5) and p["single_pair_shift_fails"] is True


def test_full_size_is_tighter_than_cpu():
    full, cpu = screen_power(140, 8), screen_power(12, 2)
    assert full["pairs"] == 1120 and full["standard_error"] < cpu["standard_error"]
    assert full["pass_probability_if_equal"] > cpu["pass_probability_if_equal"]
    assert full["single_pair_shift_fails"] is False
