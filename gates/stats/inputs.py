"""Reading and checking judge inputs against gates/stats/schemas/input-<kind>.schema.json."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from gates.stats.canonical import PACKAGE_DIR
from gates.stats.errors import InputError

KINDS = ("abba", "noninferiority", "determinism", "latency")


def json_path(parts: Iterable[Any]) -> str:
    """('cases', 3, 'legs') -> '$.cases[3].legs'."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _reject_constant(name: str) -> float:
    # Python's json accepts NaN and Infinity; a statistic fed one silently poisons every bound.
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def load_input(path: str | Path) -> Any:
    """Parse a JSON file; InputError names the file and where parsing failed."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(source, "$", f"cannot read file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(source, "$", f"not UTF-8 text: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(source, "$", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except ValueError as exc:
        raise InputError(source, "$", str(exc)) from exc


@lru_cache(maxsize=None)
def input_schema(kind: str) -> dict:
    if kind not in KINDS:
        raise ValueError(f"unknown judge kind {kind!r}; expected one of {', '.join(KINDS)}")
    return json.loads((PACKAGE_DIR / "schemas" / f"input-{kind}.schema.json").read_text("utf-8"))


def check_input(kind: str, data: Any, source: str = "<input>") -> None:
    """Validate data against the input schema of kind; the first error (in document order) is raised."""
    _require_finite(data, [], source)
    validator = jsonschema.Draft202012Validator(input_schema(kind))
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        first = jsonschema.exceptions.best_match(errors) or errors[0]
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InputError(source, json_path(first.absolute_path), first.message + more)


def _require_finite(value: Any, path: list, source: str) -> None:
    # Callers passing Python objects can smuggle in NaN/Infinity, which JSON Schema's "number" accepts.
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(source, json_path(path), f"{value!r} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            _require_finite(item, path + [key], source)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _require_finite(item, path + [index], source)


def require_unique(items: Sequence[dict], key_of, where: str, source: str) -> None:
    """Raise InputError at the second occurrence of a repeated key."""
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        key = key_of(item)
        if key in seen:
            raise InputError(source, f"{where}[{index}]", f"duplicate {key!r} (first at {where}[{seen[key]}])")
        seen[key] = index
