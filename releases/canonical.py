"""Canonical JSON (what gets hashed) and sha256 helpers."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from releases.errors import RecordError

_CHUNK = 1 << 20


def _check_keys(obj: Any, path: str) -> None:
    # json.dumps would silently turn int keys into strings, changing the hash meaning.
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, str):
                raise RecordError(f"non-string key {key!r} cannot be canonicalised", where=path or "/")
            _check_keys(value, f"{path}/{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _check_keys(value, f"{path}/{i}")


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, UTF-8, separators ',' ':', no NaN/Infinity."""
    _check_keys(obj, "")
    try:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise RecordError(f"cannot canonicalise: {exc} (NaN and Infinity are not JSON)") from exc
    except TypeError as exc:
        raise RecordError(f"cannot canonicalise: {exc}") from exc
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj`."""
    return sha256_hex(canonical_json(obj))


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def load_json_bytes(data: bytes, *, where: str = "") -> Any:
    """Parse JSON strictly: duplicate keys and NaN/Infinity are errors."""

    def no_dupes(pairs: list[tuple[str, Any]]) -> dict:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise RecordError(f"duplicate key {key!r}", where=where)
            seen[key] = value
        return seen

    def no_constants(name: str) -> Any:
        raise RecordError(f"{name} is not JSON", where=where)

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_dupes, parse_constant=no_constants)
    except UnicodeDecodeError as exc:
        raise RecordError(f"not UTF-8: {exc}", where=where) from exc
    except json.JSONDecodeError as exc:
        raise RecordError(f"not JSON: {exc}", where=where) from exc
