"""Receipts: in-toto Statement v1 in a DSSE envelope, predicate validated by kind."""
from __future__ import annotations

import re

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from releases import dsse
from releases.canonical import canonical_json, load_json_bytes
from releases.errors import RecordError
from releases.schema import validate

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
RECEIPT_KINDS = ("candidate", "build", "reproducibility", "phase", "lane", "acceptance", "rehearsal",
                 "approval",
                 "verdict-abba", "verdict-noninferiority", "verdict-determinism", "verdict-latency")
PREDICATE_TYPES = {
    kind: ("https://slsa.dev/provenance/v1" if kind == "build" else f"https://assay.dev/predicates/{kind}/v1")
    for kind in RECEIPT_KINDS
}
_KIND_OF = {uri: kind for kind, uri in PREDICATE_TYPES.items()}


_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(/[A-Za-z0-9][A-Za-z0-9._-]{0,63}){0,3}$")


def check_kind_label(kind: str, label: str | None) -> None:
    """Refuse (RecordError) a receipt kind without a predicate type, or a malformed label: the
    shapes defs.schema.json calls receipt_kind and receipt_label."""
    if kind not in PREDICATE_TYPES:
        raise RecordError(f"unknown receipt kind {kind!r}; known: {', '.join(sorted(PREDICATE_TYPES))}", where=kind)
    if label is not None and not (isinstance(label, str) and _LABEL.match(label)):
        raise RecordError(f"receipt label {label!r} is not up to four labels joined by '/' "
                          "(each [A-Za-z0-9][A-Za-z0-9._-]{0,63})", where=kind)


def subject(name: str, sha256: str) -> dict:
    """One in-toto subject: a name and its sha256."""
    return {"name": name, "digest": {"sha256": sha256}}


def statement(kind: str, subjects: list[dict], predicate: dict) -> dict:
    if kind not in PREDICATE_TYPES:
        raise RecordError(f"unknown receipt kind {kind!r}; known: {', '.join(RECEIPT_KINDS)}")
    validate(kind, predicate, f"{kind} predicate")
    stmt = {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPES[kind], "predicate": predicate}
    validate("statement", stmt, f"{kind} statement")
    return stmt


def sign_receipt(kind: str, subjects: list[dict], predicate: dict, private_key: Ed25519PrivateKey) -> dict:
    """Validate the predicate, wrap it in a Statement and sign it into a DSSE envelope."""
    stmt = statement(kind, subjects, predicate)
    return dsse.sign(canonical_json(stmt), dsse.INTOTO_PAYLOAD_TYPE, private_key)


def open_receipt(
    envelope: dict, public_key: Ed25519PublicKey, expected_kind: str | None = None, *, where: str = ""
) -> tuple[dict, dict]:
    """Verify the signature, then validate statement and predicate; return (statement, predicate)."""
    payload = dsse.verify(envelope, public_key, payload_type=dsse.INTOTO_PAYLOAD_TYPE, where=where)
    stmt = load_json_bytes(payload, where=where)
    validate("statement", stmt, where)
    kind = _KIND_OF.get(stmt["predicateType"])
    if kind is None:
        raise RecordError(f"unknown predicateType {stmt['predicateType']!r}", where=where)
    if expected_kind is not None and kind != expected_kind:
        raise RecordError(f"receipt is a {kind} receipt, expected {expected_kind}", where=where)
    validate(kind, stmt["predicate"], where)
    return stmt, stmt["predicate"]


def kind_of(stmt: dict) -> str | None:
    return _KIND_OF.get(stmt.get("predicateType", ""))
