"""Who was measured: the identities a verdict names, and the code that measured them."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from releases.canonical import digest, sha256_hex

from gates.judged.client import Endpoint
from gates.judged.errors import IdentityError

PACKAGE_DIR = Path(__file__).resolve().parent
_SERVED_KEYS = ("engine_version", "package_sha256", "model_sha256", "profile_sha256")


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over gates/judged's *.py and *.json files ({relative path: sha256}), corpora included."""
    files = sorted(p for p in PACKAGE_DIR.rglob("*")
                   if p.is_file() and p.suffix in {".py", ".json"} and "__pycache__" not in p.parts)
    return digest({p.relative_to(PACKAGE_DIR).as_posix(): sha256_hex(p.read_bytes()) for p in files})


def served_identity(endpoint: Endpoint) -> dict:
    """The identity a server reports about itself (GET /v1/engine/status): engine version and the
    package, model and profile digests; what was actually served, whatever was said to be."""
    ident = endpoint.status().get("identity", {})
    return {k: ident.get(k) for k in _SERVED_KEYS}


_HEX40, _HEX64 = re.compile(r"^[0-9a-f]{40}$"), re.compile(r"^[0-9a-f]{64}$")


def check_incumbent(identity: dict | None) -> dict | None:
    """The incumbent identity builders.incumbent returns, checked: IdentityError names the field."""
    if identity is None:
        return None
    if not isinstance(identity, dict):
        raise IdentityError("incumbent identity", "expected an object {version, wheel_sha256, source_commit, origin}")
    extra = sorted(set(identity) - {"version", "wheel_sha256", "source_commit", "origin"})
    if extra:
        raise IdentityError("incumbent identity", f"unknown field(s) {', '.join(extra)}")
    if not isinstance(identity.get("version"), str) or not identity["version"]:
        raise IdentityError("incumbent identity.version", "expected a non-empty string")
    if not isinstance(identity.get("wheel_sha256"), str) or not _HEX64.match(identity["wheel_sha256"]):
        raise IdentityError("incumbent identity.wheel_sha256", "expected 64 lower-case hex digits")
    commit = identity.get("source_commit")
    if commit is not None and not (isinstance(commit, str) and _HEX40.match(commit)):
        raise IdentityError("incumbent identity.source_commit", "expected 40 lower-case hex digits or null")
    if identity.get("origin") not in ("store", "ref", "wheel"):
        raise IdentityError("incumbent identity.origin", "expected store, ref or wheel")
    return dict(identity)


def check_candidate_ref(ref: dict | None) -> dict | None:
    """A candidate ref {id, commit, tree}, checked: IdentityError names the field."""
    if ref is None:
        return None
    if not isinstance(ref, dict):
        raise IdentityError("candidate ref", "expected an object {id, commit, tree}")
    for key, pattern in (("id", _HEX64), ("commit", _HEX40), ("tree", _HEX40)):
        if not isinstance(ref.get(key), str) or not pattern.match(ref[key]):
            raise IdentityError(f"candidate ref.{key}", f"expected {'64' if pattern is _HEX64 else '40'} lower-case hex digits")
    return {k: ref[k] for k in ("id", "commit", "tree")}
