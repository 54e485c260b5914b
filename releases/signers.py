"""keys/signers.json: the people who may approve a release or grant its waivers, and the lanes that
pin a key of their own (a lane host's: its receipts, lane evidence included, are signed with it),
with their keys.

The ready manifest binds it, so the release key vouches for the list and the approver signs over
it too; verify checks every person's and every lane's signature against this list, never against
a key a record carries about itself."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases.atomic import write_atomic
from releases.canonical import canonical_json, sha256_hex
from releases.errors import KeyFileError, RecordError
from releases.keys import key_id, load_public_key, public_pem
from releases.schema import validate

SIGNERS = "keys/signers.json"
SIGNERS_SCHEMA = "assay/signers/v1"

# A listed person: None (may only approve unsigned), or a public key (PEM text/bytes or key object).
PersonKey = str | bytes | Ed25519PublicKey | None


def _entry(name: str, key: PersonKey, where: str) -> dict:
    if key is None:
        return {"name": name, "key_id": None, "public_key": None}
    try:
        public = load_public_key(key)
    except KeyFileError as exc:
        raise RecordError(f"{name}: {exc}", where=where) from None
    return {"name": name, "key_id": key_id(public), "public_key": public_pem(public).decode("ascii")}


def build_signers(candidate: dict, *, approvers: Mapping[str, PersonKey], grantors: Mapping[str, PersonKey] = {},
                  allow_unsigned_approval: bool, lanes: Mapping[str, PersonKey] = {}) -> dict:
    """The signers record for one candidate (a candidate ref) from the configured people and the
    lanes' pinned keys (lane name -> public key; a lane without one signs with the release key)."""
    record = {"signers_schema": SIGNERS_SCHEMA, "candidate": dict(candidate),
              "allow_unsigned_approval": bool(allow_unsigned_approval),
              "approvers": [_entry(n, k, f"approvers/{n}") for n, k in sorted(approvers.items())],
              "grantors": [_entry(n, k, f"grantors/{n}") for n, k in sorted(grantors.items())]}
    pinned = [_entry(n, k, f"lanes/{n}") for n, k in sorted(lanes.items()) if k is not None]
    if pinned:
        record["lanes"] = pinned
    return validate("signers", record, SIGNERS)


def add_signers(release_root: str | Path, record: dict) -> dict:
    """Write keys/signers.json into a release directory; returns the manifest's `signers` entry."""
    data = canonical_json(validate("signers", record, SIGNERS))
    path = Path(release_root) / SIGNERS
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
    return {"path": SIGNERS, "sha256": sha256_hex(data)}


def person_keys(record: dict, role: str) -> dict[str, Ed25519PublicKey | None]:
    """name -> public key (None when listed without one) of the `approvers`, `grantors` or `lanes`."""
    out: dict[str, Any] = {}
    for entry in record.get(role, []):
        key = load_public_key(entry["public_key"]) if entry["public_key"] else None
        if key is not None and key_id(key) != entry["key_id"]:
            raise RecordError(f"{role} {entry['name']}: key_id differs from its public key", where=SIGNERS)
        out[entry["name"]] = key
    return out


def lane_keys(record: dict | None) -> dict[str, Ed25519PublicKey]:
    """lane name -> its pinned public key, from a signers record (none: every lane signs as the release)."""
    return {name: key for name, key in person_keys(record, "lanes").items() if key is not None} if record else {}
