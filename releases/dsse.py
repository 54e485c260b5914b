"""DSSE envelopes (Dead Simple Signing Envelope v1) signed with Ed25519."""
from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from releases.errors import RecordError
from releases.keys import key_id
from releases.schema import validate

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
MANIFEST_PAYLOAD_TYPE = "application/vnd.assay.manifest+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """Pre-Authentication Encoding: what is actually signed."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def sign(payload: bytes, payload_type: str, private_key: Ed25519PrivateKey) -> dict:
    signature = private_key.sign(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": key_id(private_key.public_key()), "sig": base64.b64encode(signature).decode("ascii")}],
    }


def verify(envelope: dict, public_key: Ed25519PublicKey, *, payload_type: str | None = None, where: str = "") -> bytes:
    """Return the payload bytes if a signature by `public_key` verifies; else RecordError."""
    validate("envelope", envelope, where)
    if payload_type is not None and envelope["payloadType"] != payload_type:
        raise RecordError(f"payloadType {envelope['payloadType']!r}, expected {payload_type!r}", where=where)
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
    except binascii.Error as exc:
        raise RecordError(f"payload is not base64: {exc}", where=where) from exc
    message = pae(envelope["payloadType"], payload)
    wanted = key_id(public_key)
    for entry in envelope["signatures"]:
        # keyid is only a hint (DSSE); try every signature but prefer the matching one.
        if entry["keyid"] not in ("", wanted):
            continue
        try:
            public_key.verify(base64.b64decode(entry["sig"], validate=True), message)
            return payload
        except (InvalidSignature, binascii.Error):
            continue
    raise RecordError(f"no valid signature by key {wanted[:16]}...", where=where)
