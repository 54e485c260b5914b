"""Canonical JSON per RFC 8785 (what gets hashed), the strict loader, and sha256 helpers."""
from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import rfc8785

from releases.errors import RecordError

_CHUNK = 1 << 20
MAX_DEPTH = 64  # records nest a dozen levels; a bound keeps hostile input from exhausting the stack
MAX_SAFE_INTEGER = 2**53 - 1  # RFC 8785 / I-JSON: integers beyond this are not exact in other languages
_MAX_DOUBLE_DIGITS = 309  # the largest finite double, 1.8e308, has 309 integer digits
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def _check_keys(obj: Any, path: str) -> None:
    # rfc8785 refuses non-string keys too, but without saying where; name the path.
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, str):
                raise RecordError(f"non-string key {key!r} cannot be canonicalised", where=path or "/")
            _check_keys(value, f"{path}/{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _check_keys(value, f"{path}/{i}")


def canonical_json(obj: Any) -> bytes:
    """RFC 8785 (JCS): keys sorted by UTF-16 code units, ECMAScript number form, no NaN/Infinity,
    integers within +-(2**53 - 1), UTF-8."""
    _check_keys(obj, "")
    try:
        return rfc8785.dumps(obj)
    except rfc8785.FloatDomainError as exc:
        raise RecordError(f"cannot canonicalise: {exc} (NaN and Infinity are not JSON)") from exc
    except rfc8785.CanonicalizationError as exc:
        raise RecordError(f"cannot canonicalise: {exc}") from exc
    except RecursionError:
        raise RecordError(f"cannot canonicalise: nested deeper than {MAX_DEPTH} levels") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj`."""
    return sha256_hex(canonical_json(obj))


def file_sha256(path: str | Path) -> str:
    """Streamed: a file of any size is hashed in 1 MiB chunks, never held in memory."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def json_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """True when arrays/objects nest deeper than `limit` (brackets inside strings do not count)."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def load_json_bytes(data: bytes, *, where: str = "") -> Any:
    """Parse JSON strictly: duplicate keys, NaN/Infinity, numbers outside what RFC 8785 represents
    and nesting deeper than MAX_DEPTH are RecordErrors naming `where`."""

    def no_dupes(pairs: list[tuple[str, Any]]) -> dict:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise RecordError(f"duplicate key {key!r}", where=where)
            seen[key] = value
        return seen

    def no_constants(name: str) -> Any:
        raise RecordError(f"{name} is not JSON", where=where)

    def bounded_int(text: str) -> int | float:
        # JSON numbers are doubles (RFC 8785, I-JSON): an integer literal beyond +-(2**53 - 1) is read as
        # the double it denotes, as every other language does. A literal longer than any finite double
        # (a 5,000-digit integer) is refused before any parser sees it.
        digits = len(text.lstrip("-"))
        if digits <= 15 or (digits == 16 and abs(int(text)) <= MAX_SAFE_INTEGER):
            return int(text)
        if digits > _MAX_DOUBLE_DIGITS:
            raise RecordError(f"integer {text[:12]}...({digits} digits) is outside the range of JSON numbers",
                              where=where)
        return finite_float(text)

    def finite_float(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise RecordError(f"number {text[:24]} is out of range", where=where)
        return value

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"not UTF-8: {exc.reason} at byte {exc.start}", where=where) from None
    if json_depth_exceeds(text):
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels", where=where)
    try:
        return json.loads(text, object_pairs_hook=no_dupes, parse_constant=no_constants,
                          parse_int=bounded_int, parse_float=finite_float)
    except json.JSONDecodeError as exc:
        raise RecordError(f"not JSON: {exc}", where=where) from None
    except RecursionError:
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels", where=where) from None
