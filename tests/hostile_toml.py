"""Hypothesis strategies for hostile TOML documents: any shape, any value TOML can spell."""
from __future__ import annotations

import json
import math

from hypothesis import strategies as st

scalars = st.one_of(
    st.text(max_size=40), st.integers(), st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "[red]x[/red]", "[/red]", "\x00", "\ud800", "../../etc/passwd", "-" * 300]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=20)


def toml_value(value) -> str:
    """TOML spelling of a Python value, inline (tables as inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are TOML's (a lone surrogate is not: a TOML error)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def set_at(doc: dict, path: list, value) -> dict:
    """A copy of doc with the value at path (keys and list indexes) replaced."""
    doc = json.loads(json.dumps(doc))
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def leaf_paths(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaf_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from leaf_paths(v, prefix + (i,))
    yield list(prefix)


def to_toml(doc: dict) -> str:
    """A whole document: every top-level key as `key = inline value`."""
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in doc.items())


# Files that are not TOML documents at all.
NOT_TOML = {
    "non-UTF-8": b"[release]\nname = \"\xff\xfe\"\n",
    "deep arrays": b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "deep inline tables": b"a = " + b"{b = " * 5000 + b"1" + b"}" * 5000 + b"\n",
    "nested 100 levels (parses, then too deep)": b"a = " + b"[" * 100 + b"]" * 100 + b"\n",
    "5000-digit integer": b"a = " + b"9" * 5000 + b"\n",
    "integer beyond 64 bits": b"a = 99999999999999999999\n",
    "NUL escape": b"a = \"x\\u0000y\"\n",
    "binary": bytes(range(256)),
    "empty": b"",
}
