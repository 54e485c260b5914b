"""The Store protocol: a write-once key/value space of files, keys like "<version>/artifacts/x.whl"."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol, runtime_checkable

from releases.errors import StoreError

_SEGMENT = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*$")


def check_key(key: str) -> str:
    """Refuse keys that could escape a prefix or name hidden/temporary files."""
    if not isinstance(key, str) or not key or key.startswith("/") or any(not _SEGMENT.match(s) for s in key.split("/")):
        raise StoreError(f"invalid store key {key!r}: want '/'-separated segments of [A-Za-z0-9._+-], none starting with '.'")
    return key


@runtime_checkable
class Store(Protocol):
    def exists(self, key: str) -> bool: ...

    def put_file(self, key: str, path: str | Path) -> str:
        """Write once; an identical existing object is accepted, a different one raises PublishRefused.
        Returns the sha256 of what is stored."""
        ...

    def get_file(self, key: str, path: str | Path) -> None: ...

    def list(self, prefix: str = "") -> list[str]:
        """Every key under `prefix`, sorted."""
        ...

    def read_bytes(self, key: str) -> bytes: ...
