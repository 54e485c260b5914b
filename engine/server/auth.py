"""Bearer API keys read from a key file (one key per line; blank lines and # comments skipped)."""
from __future__ import annotations

import hmac
import os
from pathlib import Path


class KeyFileError(ValueError):
    pass


def read_keys(path: str | Path | None) -> list[str]:
    if path is None:
        return []
    try:
        mode = os.stat(path).st_mode
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise KeyFileError(f"{path}: cannot read API key file: {e.strerror}") from None
    if mode & 0o077:
        # A key others can read is a key others hold: refuse it rather than serve behind it.
        raise KeyFileError(f"{path}: API key file is readable by group or others (mode {mode & 0o777:o}); "
                           "chmod 600 it")
    keys = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not keys:
        raise KeyFileError(f"{path}: API key file holds no key")
    return keys


class Authenticator:
    """Checks an Authorization header against the configured keys in constant time."""

    def __init__(self, keys: list[str]):
        self.keys = [k.encode("utf-8") for k in keys]

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    @property
    def primary_key(self) -> str | None:
        return self.keys[0].decode("utf-8") if self.keys else None

    def match(self, authorization: str | None) -> str | None:
        """The configured key this header presents, or None. Every key is compared, so the
        time taken does not say which key (or how much of one) matched."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        given = authorization[len("Bearer "):].strip().encode("utf-8")
        found = None
        for k in self.keys:
            if hmac.compare_digest(given, k):
                found = k
        return found.decode("utf-8") if found is not None else None

    def check(self, authorization: str | None) -> bool:
        return not self.keys or self.match(authorization) is not None
