"""Reading and checking judge inputs against gates/stats/schemas/input-<kind>.schema.json."""

from __future__ import annotations

import json
import math
import os
import stat
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


MAX_BYTES = 256 << 20  # a judge's input is measurements, not a dump; sized before it is read
MAX_DEPTH = 64  # the deepest input schema is 5 levels
INT_LIMIT = 1 << 63  # counts, ids and seeds; a larger integer is no measurement (and overflows floats)


class _HugeInt(str):
    """An integer literal too large to be a measurement, kept as text until its JSON path is known."""


def _parse_int(text: str) -> int | _HugeInt:
    # int() of a very long literal is slow and, past 4300 digits, a ValueError with no location.
    if len(text.lstrip("-")) > 19:
        return _HugeInt(text)
    value = int(text)
    return value if -INT_LIMIT < value < INT_LIMIT else _HugeInt(text)


def _reject_constant(name: str) -> float:
    # Python's json accepts NaN and Infinity; a statistic fed one silently poisons every bound.
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def _read_bounded(path: str | Path, source: str) -> bytes:
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise InputError(source, "$", f"cannot read file: {getattr(exc, 'strerror', None) or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise InputError(source, "$", "cannot read file: is a directory")
    if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
        raise InputError(source, "$", "cannot read file: not a regular file")
    if info.st_size > MAX_BYTES:
        raise InputError(source, "$", f"file is {info.st_size} bytes; an input is at most {MAX_BYTES}")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(source, "$", f"cannot read file: {exc.strerror or exc}") from exc


def load_input(path: str | Path) -> Any:
    """Parse a JSON file; InputError names the file and where parsing failed. Bounded: the file's
    size before reading, the nesting depth, and integers (to what a measurement can be)."""
    source = str(path)
    raw = _read_bounded(path, source)
    if len(raw) > MAX_BYTES:
        raise InputError(source, "$", f"file is larger than {MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, "$", f"not UTF-8 text: invalid byte 0x{raw[exc.start]:02x} at offset {exc.start}") from exc
    try:
        data = json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise InputError(source, "$", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError:
        raise InputError(source, "$", f"arrays or objects nested far deeper than the {MAX_DEPTH} levels an input may have") from None
    except ValueError as exc:
        raise InputError(source, "$", str(exc)) from exc
    _require_finite(data, source)
    return data


@lru_cache(maxsize=None)
def input_schema(kind: str) -> dict:
    if kind not in KINDS:
        raise ValueError(f"unknown judge kind {kind!r}; expected one of {', '.join(KINDS)}")
    return json.loads((PACKAGE_DIR / "schemas" / f"input-{kind}.schema.json").read_text("utf-8"))


def check_input(kind: str, data: Any, source: str = "<input>") -> None:
    """Validate data against the input schema of kind; the first error (in document order) is raised."""
    _require_finite(data, source)
    validator = jsonschema.Draft202012Validator(input_schema(kind))
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        first = jsonschema.exceptions.best_match(errors) or errors[0]
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InputError(source, json_path(first.absolute_path), first.message + more)


def _require_finite(data: Any, source: str) -> None:
    """Depth, finite floats and bounded integers everywhere. Callers passing Python objects can
    smuggle in NaN/Infinity, which JSON Schema's "number" accepts. Iterative: depth is checked here."""
    stack: list[tuple[list, Any]] = [([], data)]
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            raise InputError(source, json_path(path[:MAX_DEPTH]), f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(source, json_path(path), f"{value!r} is not a finite number")
        if isinstance(value, _HugeInt) or (isinstance(value, int) and not -INT_LIMIT < value < INT_LIMIT):
            raise InputError(source, json_path(path), "integer out of range (a measurement, count or seed "
                                                      "is less than 2**63 in magnitude)")
        if isinstance(value, dict):  # pushed in reverse, so the first problem in document order is found
            stack.extend(reversed([(path + [key], item) for key, item in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([(path + [index], item) for index, item in enumerate(value)]))


def require_unique(items: Sequence[dict], key_of, where: str, source: str) -> None:
    """Raise InputError at the second occurrence of a repeated key."""
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        key = key_of(item)
        if key in seen:
            raise InputError(source, f"{where}[{index}]", f"duplicate {key!r} (first at {where}[{seen[key]}])")
        seen[key] = index
