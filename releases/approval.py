"""Approval records: who may approve, the decision bound to one ready manifest, and the approver's
own signature over that decision (DSSE, Ed25519, the approver's key listed in assay.toml)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from releases import dsse
from releases.canonical import canonical_json, load_json_bytes
from releases.errors import ApprovalRefused, KeyFileError, RecordError
from releases.keys import key_id, load_public_key
from releases.manifest import approval_digest
from releases.schema import validate

DECISION_PAYLOAD_TYPE = "application/vnd.assay.approval-decision+json"
DECISION_TYPE = "https://assay.dev/approval-decision/v1"


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def check_approver(approver: str, allowed: Iterable[str]) -> None:
    """Refuse an approver not on the allowed list (an empty list allows nobody)."""
    allowed = tuple(allowed)
    if approver not in allowed:
        listed = ", ".join(allowed) if allowed else "<empty>"
        raise ApprovalRefused(f"approver {approver!r} is not on the allowed list [{listed}]",
                              approver=approver, allowed=allowed)


def decision_statement(manifest_sha256: str, *, decision: str, approver: str, reason: str,
                       acknowledged_waivers: Iterable[str]) -> dict:
    """What an approver signs: the ready manifest's digest and every word of the decision."""
    return {"_type": DECISION_TYPE, "manifest_sha256": manifest_sha256, "decision": decision, "approver": approver,
            "reason": reason, "acknowledged_waivers": sorted(set(acknowledged_waivers))}


def sign_decision(manifest_sha256: str, *, decision: str, approver: str, reason: str,
                  acknowledged_waivers: Iterable[str] = (), private_key: Ed25519PrivateKey) -> dict:
    """The approver's DSSE envelope over the decision about the ready manifest `manifest_sha256`."""
    stmt = decision_statement(manifest_sha256, decision=decision, approver=approver, reason=reason,
                              acknowledged_waivers=acknowledged_waivers)
    return dsse.sign(canonical_json(stmt), DECISION_PAYLOAD_TYPE, private_key)


def check_signed_decision(envelope: Any, *, manifest_sha256: str, decision: str, approver: str, reason: str,
                          acknowledged_waivers: Iterable[str], approver_keys: Mapping[str, Any]) -> str:
    """The key id that signed, after checking that `approver`'s listed key signed exactly this decision
    about exactly this manifest; ApprovalRefused saying what does not hold."""
    allowed = tuple(approver_keys)

    def refuse(message: str) -> ApprovalRefused:
        return ApprovalRefused(message, approver=approver, allowed=allowed)

    listed = approver_keys.get(approver)
    if listed is None:
        why = "is not listed" if approver not in approver_keys else "is listed without a public key"
        raise refuse(f"approver {approver!r} {why}; a signed approval needs the approver's public key in assay.toml")
    try:
        public = load_public_key(listed)
    except KeyFileError as exc:
        raise refuse(f"approver {approver!r}: the listed public key is unusable: {exc}") from None
    try:
        payload = dsse.verify(envelope, public, payload_type=DECISION_PAYLOAD_TYPE, where="approval signature")
        signed = load_json_bytes(payload, where="approval signature")
    except RecordError as exc:
        raise refuse(f"the approval is not signed by {approver}'s listed key {key_id(public)}"
                     f"{_signer_hint(envelope)}: {exc.message}") from None
    expected = decision_statement(manifest_sha256, decision=decision, approver=approver, reason=reason,
                                  acknowledged_waivers=acknowledged_waivers)
    if not isinstance(signed, dict) or signed.get("manifest_sha256") != manifest_sha256:
        got = signed.get("manifest_sha256") if isinstance(signed, dict) else None
        raise refuse(f"the signed decision is about manifest {got}, "
                     f"not this release's ready manifest {manifest_sha256}")
    differing = sorted(k for k in expected if signed.get(k) != expected[k])
    if differing or set(signed) != set(expected):
        raise refuse(f"the signed decision differs from the submitted one in: {', '.join(differing) or 'its keys'}")
    return key_id(public)


def _signer_hint(envelope: Any) -> str:
    try:
        ids = [s.get("keyid") for s in envelope["signatures"]]
    except (TypeError, KeyError, AttributeError):
        return ""
    return f" (the envelope names key {', '.join(map(str, ids))})" if ids else ""


def build_approval(
    manifest: dict,
    *,
    decision: str,
    approver: str,
    allowed_approvers: Iterable[str],
    reason: str,
    acknowledged_waivers: Iterable[str] = (),
    flow_run_id: str,
    decided_at: str | None = None,
    signature: dict | None = None,
    approver_keys: Mapping[str, Any] | None = None,
    allow_unsigned: bool = True,
) -> dict:
    """An approval record over `manifest` (which must be ready); checks approver, waivers and, when
    the decision comes signed, the approver's signature against `approver_keys` (name -> public key).
    An unsigned decision is accepted only when `allow_unsigned`, and recorded as `signed: false`."""
    allowed = tuple(allowed_approvers)
    if manifest.get("state") != "ready":
        raise ApprovalRefused(f"manifest is {manifest.get('state')}; only a ready manifest can be approved",
                              approver=approver, allowed=allowed)
    check_approver(approver, allowed)
    acked = sorted(set(acknowledged_waivers))
    if decision == "approve":
        unacked = sorted({w["id"] for w in manifest.get("waivers", [])} - set(acked))
        if unacked:
            raise ApprovalRefused(f"approval must acknowledge every waiver; not acknowledged: {', '.join(unacked)}",
                                  approver=approver, allowed=allowed)
    digest_ = approval_digest(manifest)
    record = {
        "candidate": manifest["candidate"],
        "manifest_sha256": digest_,
        "decision": decision,
        "approver": approver,
        "reason": reason,
        "acknowledged_waivers": acked,
        "flow_run_id": flow_run_id,
        "decided_at": decided_at or now_rfc3339(),
        "signed": signature is not None,
    }
    if signature is not None:
        record["key_id"] = check_signed_decision(signature, manifest_sha256=digest_, decision=decision,
                                                 approver=approver, reason=reason, acknowledged_waivers=acked,
                                                 approver_keys=approver_keys or {})
        record["signature"] = signature
    elif not allow_unsigned:
        raise ApprovalRefused(f"the {decision} by {approver!r} is unsigned and the configuration does not allow "
                              "unsigned approvals; sign it with `assay approve --key`",
                              approver=approver, allowed=allowed)
    return validate("approval", record, "approval")


def approval_subjects(approval: dict) -> list[dict]:
    """The approval receipt speaks about the ready manifest it approves."""
    return [{"name": "manifest.json", "digest": {"sha256": approval["manifest_sha256"]}}]
