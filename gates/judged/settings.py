"""Per-lane gate settings: the defaults of each size, overlaid by the lane's `[lanes.gates.*]` tables.

`full` is the GPU-lane size of issue 13; `cpu` is the size a 2-core CPU lane can afford (its
power is computed in gates.judged.power and stated in docs/STATISTICS.md). The flows map
assay.toml's `[lanes.gates.<gate>]` tables into the dict `resolve` takes; flows/config.schema.json
checks the same keys at load, and `resolve` checks them again so a library caller gets the same
typed error.
"""

from __future__ import annotations

import copy
from typing import Any

from gates.judged.errors import SettingsError

SIZES = ("cpu", "full")
GATES = ("abba", "noninferiority", "determinism", "latency")

_COMMON: dict[str, dict[str, Any]] = {
    "abba": {"min_ratio": 0.95, "floor": 0.95, "max_leg_spread": 0.10, "cases": None, "repeats": 1},
    "noninferiority": {"cases": 140, "variants": 8, "seed": 0, "resamples": 20000, "confidence": 0.95,
                       "max_error_rate": 0.01, "min_perturbed_cases": 10, "max_tokens": 96,
                       "concurrency": 8},
    "determinism": {"prompts": 80, "max_tokens": 64},
    "latency": {"absolute_s": 0.25, "relative": 0.25, "fanout": 4, "repeats": 3, "max_tokens": 8},
}

# The CPU size: what two shared cores finish inside a `make run`. Leg spread is wider because CPU
# timing noise is real; the judge still says inconclusive beyond it.
_CPU: dict[str, dict[str, Any]] = {
    "abba": {"max_leg_spread": 0.20, "repeats": 3},
    "noninferiority": {"cases": 8, "variants": 2, "max_tokens": 24, "concurrency": 1, "min_perturbed_cases": 8},
    "determinism": {"prompts": 4, "max_tokens": 16},
    "latency": {"fanout": 2, "repeats": 3, "max_tokens": 4},
}

# Each key's type, and the bounds a value must respect.
_TYPES: dict[str, dict[str, tuple]] = {
    "abba": {"min_ratio": (float, 0.0, None), "floor": (float, 0.0, None), "max_leg_spread": (float, 0.0, None),
             "cases": (list, None, None), "repeats": (int, 1, 20)},
    "noninferiority": {"cases": (int, 1, 140), "variants": (int, 1, 8), "seed": (int, 0, None),
                       "resamples": (int, 100, 1_000_000), "confidence": (float, 0.5, 0.9999),
                       "max_error_rate": (float, 0.0, 1.0), "min_perturbed_cases": (int, 0, None),
                       "max_tokens": (int, 1, 4096), "concurrency": (int, 1, 64)},
    "determinism": {"prompts": (int, 1, 140), "max_tokens": (int, 1, 4096)},
    "latency": {"absolute_s": (float, 0.0, None), "relative": (float, 0.0, None), "fanout": (int, 1, 64),
                "repeats": (int, 1, 100), "max_tokens": (int, 1, 4096)},
}


# The keys that decide what is measured (how many cases, prompts, tokens, repeats); the others are
# thresholds a judge applies. Measurements kept as evidence are reused only under the same
# measuring keys (flows/judged_evidence.py), while thresholds are applied afresh on every judging.
MEASURING: dict[str, tuple[str, ...]] = {
    "abba": ("cases", "repeats"),
    "noninferiority": ("cases", "variants", "max_tokens", "concurrency"),
    "determinism": ("prompts", "max_tokens"),
    "latency": ("fanout", "repeats", "max_tokens"),
}


def measuring(settings: dict[str, Any]) -> dict[str, Any]:
    """The measuring keys of resolved settings ({"size", <gate>: {key: value}}), for evidence reuse."""
    return {"size": settings["size"],
            **{gate: {k: settings[gate][k] for k in keys} for gate, keys in MEASURING.items()}}


def defaults(size: str) -> dict[str, dict[str, Any]]:
    """The settings of a size before any lane overrides."""
    if size not in SIZES:
        raise SettingsError("size", f"unknown size {size!r}; expected one of {', '.join(SIZES)}")
    out = copy.deepcopy(_COMMON)
    if size == "cpu":
        for gate, values in _CPU.items():
            out[gate].update(values)
    return out


def resolve(size: str, lane_gates: dict[str, Any] | None = None) -> dict[str, Any]:
    """Defaults of `size` overlaid by a lane's gate tables ({"abba": {"min_ratio": 0.97}, ...});
    returns {"size": size, <gate>: {...}}; SettingsError names the bad key."""
    out: dict[str, Any] = defaults(size)
    for gate, table in (lane_gates or {}).items():
        if gate == "size":
            continue
        if gate not in GATES:
            raise SettingsError(f"gates.{gate}", f"unknown gate; expected one of {', '.join(GATES)}")
        if not isinstance(table, dict):
            raise SettingsError(f"gates.{gate}", f"expected a table, got {type(table).__name__}")
        for key, value in table.items():
            out[gate][key] = _check(gate, key, value)
    out["size"] = size
    return out


def _check(gate: str, key: str, value: Any) -> Any:
    where = f"gates.{gate}.{key}"
    if key not in _TYPES[gate]:
        raise SettingsError(where, f"unknown key; expected one of {', '.join(sorted(_TYPES[gate]))}")
    kind, low, high = _TYPES[gate][key]
    if kind is list:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise SettingsError(where, "expected a non-empty list of case ids")
        return list(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise SettingsError(where, f"expected {'an integer' if kind is int else 'a number'}, got {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise SettingsError(where, f"expected a finite number, got {value!r}")
    if low is not None and value < low or high is not None and value > high:
        bounds = f">= {low}" + (f" and <= {high}" if high is not None else "")
        raise SettingsError(where, f"{value!r} out of range; expected {bounds}")
    return kind(value)
