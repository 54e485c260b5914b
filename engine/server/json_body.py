"""Decoding a request body as JSON that the rest of the server can trust.

`json.loads` accepts what no later step can handle: nesting deep enough to exhaust the
interpreter's recursion limit, and `\\ud800`-style escapes that decode to unpaired surrogates,
which cannot be encoded as UTF-8 (the tokenizer, the log digests and the response body all
encode). Both are refused here, before validation, with the path of the offending value.
"""
from __future__ import annotations

import json
from typing import Any

# Deepest nesting any documented request body needs is 4 (body > input > message > part);
# 32 leaves room while keeping every later recursive step far from Python's limit.
MAX_DEPTH = 32


class BodyError(ValueError):
    """The body is not JSON the server accepts; `param` is the path of the offending value."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message, self.param = message, param


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _path(parts: tuple) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _check(data: Any, max_depth: int) -> None:
    """At most max_depth objects and arrays inside one another (the body itself counts),
    every string and key encodable as UTF-8 (no unpaired surrogate); iterative, so that it
    cannot itself overflow the stack."""
    stack: list[tuple[Any, tuple]] = [(data, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, (dict, list)) and len(where) >= max_depth:
            raise BodyError(f"request body nests deeper than {max_depth} levels at "
                            f"'{_path(where)}'", _path(where))
        if isinstance(value, str):
            if _has_surrogate(value):
                raise BodyError(f"Invalid value for '{_path(where) or 'body'}': the string "
                                f"holds an unpaired UTF-16 surrogate escape", _path(where) or None)
        elif isinstance(value, dict):
            for k, v in value.items():
                if _has_surrogate(k):
                    raise BodyError(f"a key under '{_path(where) or 'body'}' holds an unpaired "
                                    f"UTF-16 surrogate escape", _path(where) or None)
                stack.append((v, where + (k,)))
        elif isinstance(value, list):
            stack.extend((v, where + (i,)) for i, v in enumerate(value))


def decode_json_body(body: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The body as a JSON object; raises BodyError naming what is wrong."""
    if not body.strip():
        raise BodyError("request body is empty: send a JSON object")
    try:
        data = json.loads(body)
    except RecursionError:  # the C decoder's own guard, hundreds of levels down
        raise BodyError(f"request body nests deeper than {max_depth} levels") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an over-long integer
        raise BodyError(f"request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise BodyError("request body must be a JSON object")
    _check(data, max_depth)
    return data
