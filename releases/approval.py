"""Approval records: who may approve, and the decision bound to one ready manifest."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterable

from releases.errors import ApprovalRefused
from releases.manifest import approval_digest
from releases.schema import validate


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def check_approver(approver: str, allowed: Iterable[str]) -> None:
    """Refuse an approver not on the allowed list (an empty list allows nobody)."""
    allowed = tuple(allowed)
    if approver not in allowed:
        listed = ", ".join(allowed) if allowed else "<empty>"
        raise ApprovalRefused(f"approver {approver!r} is not on the allowed list [{listed}]",
                              approver=approver, allowed=allowed)


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
) -> dict:
    """An approval record over `manifest` (which must be ready); checks approver and waivers."""
    if manifest.get("state") != "ready":
        raise ApprovalRefused(f"manifest is {manifest.get('state')}; only a ready manifest can be approved",
                              approver=approver, allowed=tuple(allowed_approvers))
    check_approver(approver, allowed_approvers)
    acked = sorted(set(acknowledged_waivers))
    if decision == "approve":
        unacked = sorted({w["id"] for w in manifest.get("waivers", [])} - set(acked))
        if unacked:
            raise ApprovalRefused(f"approval must acknowledge every waiver; not acknowledged: {', '.join(unacked)}",
                                  approver=approver, allowed=tuple(allowed_approvers))
    record = {
        "candidate": manifest["candidate"],
        "manifest_sha256": approval_digest(manifest),
        "decision": decision,
        "approver": approver,
        "reason": reason,
        "acknowledged_waivers": acked,
        "flow_run_id": flow_run_id,
        "decided_at": decided_at or now_rfc3339(),
    }
    return validate("approval", record, "approval")


def approval_subjects(approval: dict) -> list[dict]:
    """The approval receipt speaks about the ready manifest it approves."""
    return [{"name": "manifest.json", "digest": {"sha256": approval["manifest_sha256"]}}]
