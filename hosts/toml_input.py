"""Reading a TOML file a person wrote (the host inventory, assay.toml) as data, never trusting it.

Every way the file can be wrong becomes one call of `fail(key_path, message)`, whose exception the
caller types (InventoryError, ConfigError): not a file, too big, not UTF-8, not TOML, nested deeper
than any real configuration, numbers TOML itself does not allow (non-64-bit integers) or that mean
nothing as settings (nan, inf). What is left is a plain dict of finite numbers, ready for its schema.
"""
from __future__ import annotations

import math
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator

Fail = Callable[[str, str], Exception]

MAX_BYTES = 1 << 20  # a configuration file is a few KiB; anything near this is not one
MAX_DEPTH = 32  # the deepest real setting is 4 levels down
INT_RANGE = (-(1 << 63), (1 << 63) - 1)  # TOML integers are 64-bit
MAX_MESSAGE = 300  # schema messages quote the offending value; a huge value must not flood the terminal


def pointer(parts: list[Any] | tuple[Any, ...]) -> str:
    """('hosts', 'a', 'port') -> '/hosts/a/port' (a JSON pointer, as the schema errors use)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def short(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + "... (truncated)"


def read_toml(path: Path, fail: Fail) -> dict[str, Any]:
    """Parse PATH; every problem raises fail(key_path, message)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise fail("", "file not found") from None
    except OSError as exc:
        raise fail("", f"cannot read: {exc.strerror or exc}") from None
    except ValueError:  # os.stat refuses a path with a NUL byte in it
        raise fail("", "cannot read: the path contains a NUL byte") from None
    if stat.S_ISDIR(info.st_mode):
        raise fail("", "is a directory, not a TOML file")
    if not stat.S_ISREG(info.st_mode):
        # a FIFO or a device would block or never end; only regular files are read
        raise fail("", "is not a regular file")
    if info.st_size > MAX_BYTES:
        raise fail("", f"is {info.st_size} bytes; a configuration file is at most {MAX_BYTES} bytes")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise fail("", f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise fail("", f"is larger than {MAX_BYTES} bytes; a configuration file is smaller")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail("", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); TOML files are UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise fail("", f"not valid TOML: {exc}") from None
    except RecursionError:
        raise fail("", f"arrays or tables nested far deeper than the {MAX_DEPTH} levels a configuration may have") from None
    except ValueError as exc:  # tomllib passes int()'s digit limit through as a bare ValueError
        raise fail("", f"not valid TOML: a number is too large ({exc})") from None
    check_values(data, fail)
    return data


def _walk(data: Any) -> Iterator[tuple[list[Any], Any]]:
    stack: list[tuple[list[Any], Any]] = [([], data)]
    while stack:  # iterative: the depth is what is being checked
        parts, value = stack.pop()
        yield parts, value
        if len(parts) > MAX_DEPTH:
            continue
        if isinstance(value, dict):
            stack.extend((parts + [k], v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((parts + [i], v) for i, v in reversed(list(enumerate(value))))


def check_values(data: Any, fail: Fail) -> None:
    """Depth, numbers that are finite and 64-bit, and strings without NUL, anywhere in the document."""
    for parts, value in _walk(data):
        if len(parts) > MAX_DEPTH:
            raise fail(pointer(parts[:MAX_DEPTH]), f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, float) and not math.isfinite(value):
            raise fail(pointer(parts), f"{value} is not a finite number; expected a number such as 10 or 2.5")
        if isinstance(value, int) and not isinstance(value, bool) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
            raise fail(pointer(parts), "integer out of range: TOML integers are 64-bit")
        if isinstance(value, str) and "\x00" in value or parts and isinstance(parts[-1], str) and "\x00" in parts[-1]:
            # "\u0000" is legal TOML, but no path, address or name can hold it
            raise fail(pointer(parts), "contains a NUL character")
