"""Waivers: recorded exceptions, each bound to exactly one candidate; a gate waiver is also bound to
its gate, lane, case and measured value and signed (DSSE) by the grantor who accepts the risk."""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from releases import dsse
from releases.candidate import require_candidate
from releases.canonical import canonical_json, load_json_bytes
from releases.errors import KeyFileError, RecordError
from releases.keys import key_id, load_public_key
from releases.schema import validate

WAIVER_PAYLOAD_TYPE = "application/vnd.assay.waiver+json"


def build_waiver(candidate: dict, *, id: str, scope: str, subject: str, measured: str,
                 approved_by: str, reason: str, **bound: str) -> dict:
    """An unsigned waiver record; `bound` may add gate, lane and case (scope "gate" needs them and a signature)."""
    record = {"candidate": dict(candidate), "id": id, "scope": scope, "subject": subject,
              "measured": measured, "approved_by": approved_by, "reason": reason, **bound}
    if scope == "gate":
        return record  # a gate waiver validates once signed (sign_waiver): its schema requires the signature
    return validate("waiver", record, f"waivers/{id}.json")


def gate_waiver_id(gate: str, lane: str, case: str) -> str:
    """A readable, stable label for a gate waiver: gate-lane-case, shortened with a digest when long."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{gate}-{lane}-{case}").strip("-._") or "waiver"
    if len(slug) <= 64:
        return slug
    return f"{slug[:47]}-{hashlib.sha256(slug.encode()).hexdigest()[:16]}"


def build_gate_waiver(candidate: dict, *, gate: str, lane: str, case: str, measured: str, grantor: str,
                      reason: str, id: str | None = None) -> dict:
    """An unsigned gate waiver for the candidate ref `candidate`; sign it with sign_waiver."""
    return build_waiver(candidate, id=id or gate_waiver_id(gate, lane, case), scope="gate",
                        subject=f"{lane}/{gate}/{case}", measured=measured, approved_by=grantor, reason=reason,
                        gate=gate, lane=lane, case=case)


def _body(waiver: dict) -> bytes:
    return canonical_json({k: v for k, v in waiver.items() if k != "signature"})


def sign_waiver(waiver: dict, private_key: Ed25519PrivateKey) -> dict:
    """The waiver with `signature`: the grantor's DSSE envelope over its canonical body (every other key)."""
    signed = {**waiver, "signature": dsse.sign(_body(waiver), WAIVER_PAYLOAD_TYPE, private_key)}
    return validate("waiver", signed, f"waivers/{waiver.get('id')}.json")


def check_waiver_signature(waiver: dict, grantor_keys: Mapping[str, Any], *, where: str = "") -> str:
    """The key id that signed `waiver`, after checking its grantor is listed with that key and the
    signature covers exactly this waiver; RecordError saying what does not hold."""
    where = where or f"waivers/{waiver.get('id')}.json"
    grantor = waiver["approved_by"]
    if "signature" not in waiver:
        raise RecordError(f"waiver {waiver['id']} is not signed by its grantor {grantor}", where=where)
    listed = grantor_keys.get(grantor)
    if listed is None:
        raise RecordError(f"grantor {grantor!r} is not listed with a public key among the waiver grantors", where=where)
    try:
        public = load_public_key(listed)
        payload = dsse.verify(waiver["signature"], public, payload_type=WAIVER_PAYLOAD_TYPE, where=where)
    except KeyFileError as exc:
        raise RecordError(f"grantor {grantor!r}: the listed public key is unusable: {exc}", where=where) from None
    except RecordError as exc:
        raise RecordError(f"not signed by grantor {grantor}'s listed key {key_id(public)}: {exc.message}",
                          where=where) from None
    if payload != _body(waiver):
        signed = load_json_bytes(payload, where=where)
        differing = sorted(k for k in set(signed) | set(waiver) - {"signature"} if signed.get(k) != waiver.get(k))
        raise RecordError(f"the signature covers another waiver (differs in: {', '.join(differing)})", where=where)
    return key_id(public)


def bind_waiver(waiver: dict, candidate: dict) -> dict:
    """Validate `waiver` and refuse it (RecordError) if it is about another candidate."""
    where = f"waivers/{waiver.get('id')}.json" if isinstance(waiver, dict) else "waiver"
    validate("waiver", waiver, where)
    require_candidate("waiver", waiver, candidate, where=where)
    return waiver
