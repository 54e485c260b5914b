"""The user's trust file: the release keys this user trusts, kept outside any release.

TOML; default `$XDG_CONFIG_HOME/assay/trust.toml` (`~/.config/assay/trust.toml`):

    [[release_keys]]
    name = "engine releases"      # optional, for people
    key_id = "<64 hex>"           # the key id `assay verify` prints, and/or
    public_key = '''-----BEGIN PUBLIC KEY-----
    ...
    -----END PUBLIC KEY-----'''   # the PEM itself (its id is derived; when both are given they must agree)
"""
from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from releases.errors import KeyFileError, TrustFileError
from releases.keys import key_id, load_public_key

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_MAX_BYTES = 1 << 20  # a trust file lists keys; anything larger is not one


@dataclass(frozen=True)
class TrustedKey:
    key_id: str
    name: str


def default_trust_file() -> Path:
    """$XDG_CONFIG_HOME/assay/trust.toml, else ~/.config/assay/trust.toml."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "assay" / "trust.toml"


def _read(path: Path) -> dict:
    label = str(path)
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise TrustFileError(label, "", f"larger than {_MAX_BYTES} bytes; not a trust file")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise TrustFileError(label, "", "file not found") from None
    except IsADirectoryError:
        raise TrustFileError(label, "", "is a directory, not a trust file") from None
    except OSError as exc:
        raise TrustFileError(label, "", f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TrustFileError(label, "", f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise TrustFileError(label, "", f"not valid TOML: {exc}") from None


def load_trust_file(path: str | Path) -> list[TrustedKey]:
    """The keys a trust file lists; TrustFileError naming the file and key path when malformed."""
    path = Path(path)
    label = str(path)
    raw = _read(path)
    unknown = sorted(set(raw) - {"release_keys"})
    if unknown:
        raise TrustFileError(label, unknown[0], "unknown key; a trust file holds [[release_keys]] tables")
    entries = raw.get("release_keys")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise TrustFileError(label, "release_keys", "expected one or more [[release_keys]] tables")
    found = []
    for i, entry in enumerate(entries):
        where = f"release_keys[{i}]"
        extra = sorted(set(entry) - {"name", "key_id", "public_key"})
        if extra:
            raise TrustFileError(label, f"{where}.{extra[0]}", "unknown key; expected name, key_id, public_key")
        name = entry.get("name", "")
        if not isinstance(name, str):
            raise TrustFileError(label, f"{where}.name", "expected a string")
        kid = entry.get("key_id")
        if kid is not None and (not isinstance(kid, str) or not _HEX64.match(kid)):
            raise TrustFileError(label, f"{where}.key_id", "expected 64 lowercase hex digits (a key id)")
        pem = entry.get("public_key")
        if pem is not None:
            if not isinstance(pem, str):
                raise TrustFileError(label, f"{where}.public_key", "expected a PEM string")
            try:
                derived = key_id(load_public_key(pem if pem.lstrip().startswith("-----BEGIN") else pem.encode()))
            except KeyFileError as exc:
                raise TrustFileError(label, f"{where}.public_key", str(exc)) from None
            if kid is not None and kid != derived:
                raise TrustFileError(label, f"{where}.key_id", f"differs from the public key's id {derived}")
            kid = derived
        if kid is None:
            raise TrustFileError(label, where, "needs key_id or public_key")
        found.append(TrustedKey(kid, name))
    return found
