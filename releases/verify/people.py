"""Checks of what people signed: the approver's decision and the grantors' waivers, each against
keys/signers.json (bound by the manifest, itself signed by the trusted release key)."""
from __future__ import annotations

from releases.approval import check_signed_decision
from releases.errors import ApprovalRefused, RecordError
from releases.manifest import approval_digest
from releases.signers import person_keys
from releases.verify.checker import Checker
from releases.waivers import check_waiver_signature


def load_signers(check: Checker, manifest: dict) -> dict | None:
    """The signers record the manifest binds (None when it binds none or the record is bad)."""
    entry = manifest.get("signers")
    if not entry:
        return None
    record = check.json(entry["path"], "signers", "signers")
    if record is None:
        return None
    if record["candidate"] != manifest["candidate"]:
        check.fail(entry["path"], "candidate", "signers list names another candidate")
        return None
    try:
        for role in ("approvers", "grantors", "lanes"):
            person_keys(record, role)
    except RecordError as exc:
        check.fail(entry["path"], "", exc.message)
        return None
    return record


def check_approval_signature(check: Checker, manifest: dict, rel: str, pred: dict, signers: dict | None, *,
                             require_signed: bool) -> None:
    """A signed approval must verify against the approver's listed key; an unsigned one must be allowed."""
    field = "payload/predicate/signature"
    if signers is not None and pred["approver"] not in {a["name"] for a in signers["approvers"]}:
        check.fail(rel, "payload/predicate/approver",
                   f"approver {pred['approver']} is not listed in {manifest['signers']['path']}")
        return
    if not pred.get("signed"):
        if require_signed:
            check.fail(rel, field, f"the approval by {pred['approver']} is unsigned (--require-signed-approval)")
        elif signers is not None and not signers["allow_unsigned_approval"]:
            check.fail(rel, field, f"the approval by {pred['approver']} is unsigned and the release's signers list "
                                   "does not allow unsigned approvals")
        else:
            check.warnings.append(f"the approval by {pred['approver']} is unsigned (the configuration allowed it)")
        return
    if signers is None:
        check.fail(rel, field, "the approval is signed but the manifest binds no signers list to check it against")
        return
    try:
        kid = check_signed_decision(pred["signature"], manifest_sha256=approval_digest(manifest),
                                    decision=pred["decision"], approver=pred["approver"], reason=pred["reason"],
                                    acknowledged_waivers=pred["acknowledged_waivers"],
                                    approver_keys=person_keys(signers, "approvers"))
    except ApprovalRefused as exc:
        check.fail(rel, field, str(exc))
        return
    check.counts["signatures"] += 1
    if kid != pred["key_id"]:
        check.fail(rel, "payload/predicate/key_id", f"names key {pred['key_id']}, the decision is signed by {kid}")


def check_waiver(check: Checker, rel: str, waiver: dict, signers: dict | None) -> None:
    """A signed waiver must verify against its grantor's listed key; an unsigned one is disclosed."""
    if "signature" not in waiver:
        check.warnings.append(f"waiver {waiver['id']} is not signed by its grantor ({waiver['approved_by']})")
        return
    if signers is None:
        check.fail(rel, "signature", "the waiver is signed but the manifest binds no signers list to check it against")
        return
    try:
        check_waiver_signature(waiver, person_keys(signers, "grantors"), where=rel)
    except RecordError as exc:
        check.fail(rel, "signature", exc.message)
        return
    check.counts["signatures"] += 1
