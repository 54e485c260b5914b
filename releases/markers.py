"""Find private markers (home paths, private keys, cloud keys, tokens) in public records."""
from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Iterable, Iterator

from releases.schema import json_pointer

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("home directory", re.compile(r"/home/[A-Za-z0-9._-]+|/root/|/Users/[A-Za-z0-9._-]+")),
    ("PEM private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
    ("cloud access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    # A secret's name alone in a public record is already a leak of intent; flag it, value or not.
    ("cloud secret key", re.compile(r"(?i)secret_?access_?key|aws_?secret")),
    ("GitHub token", re.compile(r"\bghp_[A-Za-z0-9]{20,}|\bgh[osur]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}")),
    ("API secret key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
)


def scan_text(text: str, extra: Iterable[str] = ()) -> list[str]:
    """Names of the markers found in `text`; extra strings match case-insensitively."""
    found = [name for name, pattern in PATTERNS if pattern.search(text)]
    lowered = text.lower()
    found += [f"private string {s!r}" for s in extra if s and s.lower() in lowered]
    return found


def _walk(obj: Any, path: list[Any]) -> Iterator[tuple[list[Any], str]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield path + [key], key
            yield from _walk(value, path + [key])
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _walk(value, path + [i])
    elif isinstance(obj, str):
        yield path, obj


def _decoded_payload(obj: Any) -> Any:
    # A DSSE payload is base64: the facts in it must be scanned decoded, not as opaque text.
    try:
        return json.loads(base64.b64decode(obj["payload"], validate=True))
    except (binascii.Error, ValueError, TypeError, KeyError):
        return None


def scan_json(obj: Any, extra: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(JSON pointer, marker name) for every string (key or value) carrying a marker."""
    extra = tuple(extra)
    hits: list[tuple[str, str]] = []
    is_envelope = isinstance(obj, dict) and "payloadType" in obj and "payload" in obj
    for path, text in _walk(obj, []):
        if is_envelope and path[:1] in (["payload"], ["signatures"]):
            continue
        hits += [(json_pointer(path), name) for name in scan_text(text, extra)]
    if is_envelope:
        payload = _decoded_payload(obj)
        if payload is None:
            hits += [(json_pointer(["payload"]), name) for name in scan_text(str(obj.get("payload")), extra)]
        else:
            hits += [("/payload" + json_pointer(p), name) for p, t in _walk(payload, []) for name in scan_text(t, extra)]
    return hits


def scan_lines(text: str, extra: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(\"line N\", marker name) for every line of a text record carrying a marker."""
    extra = tuple(extra)
    return [(f"line {n}", name) for n, line in enumerate(text.splitlines(), 1) for name in scan_text(line, extra)]
