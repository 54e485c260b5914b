"""Shared pieces of the archive comparisons: one difference, content detail, member sets.

Kinds (INTERFACES.md, reproducibility record): content (the bytes of a member or file),
timestamp, mode (permission bits), order, missing (only in build a), extra (only in build b),
header (archive or member metadata other than time and mode: owner, compression method,
gzip header, zip comment, raw header encoding), size (the stored, compressed representation
differs while the uncompressed content is identical).
"""
from __future__ import annotations

import hashlib
from collections import Counter
from typing import Iterable


def difference(member: str | None, kind: str, detail: str) -> dict:
    return {"member": member, "kind": kind, "detail": detail}


def content_detail(a: bytes, b: bytes) -> str:
    """Where two byte strings first differ, without quoting them (they may embed paths)."""
    offset = first_difference(a, b)
    line = a[:offset].count(b"\n") + 1
    return (f"sha256 {_short(a)} -> {_short(b)}, {len(a)} -> {len(b)} bytes, "
            f"first difference at byte {offset} (line {line})")


def first_difference(a: bytes, b: bytes, block: int = 4096) -> int:
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start:start + block] == b[start:start + block]:
        start += block
    end = min(start + block, limit)
    return next((i for i in range(start, end) if a[i] != b[i]), limit)


def member_set_diffs(names_a: list[str], names_b: list[str]) -> list[dict]:
    """missing / extra members, and one order difference if the common members are permuted."""
    set_a, set_b = set(names_a), set(names_b)
    diffs = [difference(n, "missing", "member only in build a") for n in names_a if n not in set_b]
    diffs += [difference(n, "extra", "member only in build b") for n in names_b if n not in set_a]
    common_a = [n for n in names_a if n in set_b]
    common_b = [n for n in names_b if n in set_a]
    i = next((i for i, (x, y) in enumerate(zip(common_a, common_b)) if x != y), None)
    if i is not None:
        diffs.append(difference(common_a[i], "order",
                                f"member order differs from common position {i}: "
                                f"build a has {common_a[i]!r}, build b has {common_b[i]!r}"))
    count_a, count_b = Counter(names_a), Counter(names_b)
    for n in sorted(set_a & set_b):
        if count_a[n] != count_b[n]:
            diffs.append(difference(n, "header", f"member name appears {count_a[n]} time(s) "
                                                 f"in build a, {count_b[n]} in build b"))
    return diffs


def field_diffs(member: str | None, kind: str, fields: Iterable[tuple[str, object, object]]) -> list[dict]:
    """One difference per (name, value a, value b) whose values differ."""
    return [difference(member, kind, f"{name} {va!r} -> {vb!r}") for name, va, vb in fields if va != vb]


def _short(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]
