"""Which key verify trusts: one the user gives, the release's own key pinned by its id, or (with a
warning) the key the release carries, which proves nothing about who made it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases.errors import KeyFileError
from releases.keys import key_id, load_public_key
from releases.release_dir import MANIFEST, PUBLIC_KEY
from releases.verify.checker import Checker

GIVEN = "given key"
PINNED = "pinned key id"
EMBEDDED = "embedded key (not pinned)"


@dataclass(frozen=True)
class TrustDecision:
    """The key verification used, and how it came to be trusted."""

    key: Ed25519PublicKey | None
    key_id: str | None
    how: str  # GIVEN, PINNED or EMBEDDED
    source: str  # where the trust came from, for people: "--key FILE", "trust file ...", ...


def _ids(expected: str | Iterable[str] | None) -> set[str]:
    if expected is None:
        return set()
    return {expected.lower()} if isinstance(expected, str) else {e.lower() for e in expected}


def resolve_key(check: Checker, manifest: dict, *, public_key: Any, expected_key_id: str | Iterable[str] | None,
                trust_source: str, require_pinned: bool) -> TrustDecision:
    """Load the verifying key and record every reason not to trust it as a failure."""
    entry = manifest.get("public_key")
    rel = entry["path"] if entry else PUBLIC_KEY
    pins = _ids(expected_key_id)
    try:
        if public_key is not None:
            key, how = load_public_key(public_key), GIVEN
        else:
            data = check.read(rel, "public_key")
            if data is None:
                return TrustDecision(None, None, EMBEDDED, trust_source)
            key, how = load_public_key(data), (PINNED if pins else EMBEDDED)
    except KeyFileError as exc:
        check.fail(rel if public_key is None else "<given key>", "", str(exc))
        return TrustDecision(None, None, GIVEN if public_key is not None else EMBEDDED, trust_source)
    kid = key_id(key)
    if entry and entry["key_id"] != kid:
        check.fail(MANIFEST, "public_key/key_id",
                   f"manifest names key {entry['key_id']}, the verifying key is {kid}")
    if pins and kid not in pins:
        check.fail(rel, "key_id", f"release is signed by key {kid}, which the trust root ({trust_source}) does not "
                                  f"list; trusted: {', '.join(sorted(pins))}")
    if how == EMBEDDED:
        check.warnings.append(
            f"trusted the key inside the release ({rel}, key id {kid}): it proves only that the release is "
            "consistent, not who made it; pin it with --key, --expect-key-id or a trust file")
        if require_pinned:
            check.fail(rel, "key_id", "only the release's own key is available and nothing pins it; give --key, "
                                      "--expect-key-id or a trust file (or --trust-embedded-key to accept it)")
    return TrustDecision(key, kid, how, trust_source)
