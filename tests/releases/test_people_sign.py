"""People sign: approvers and waiver grantors with their own keys, checked by the pipeline and by verify."""
from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from releases import approval as approval_mod
from releases import manifest as mf
from releases.errors import ApprovalRefused, RecordError
from releases.keys import key_id
from releases.verify import verify_release
from releases.waivers import check_waiver_signature, sign_waiver
from tests.releases.signed_release import APPROVER, GRANTOR, approve, new_people, stage_ready


def _fields(report) -> set[tuple[str, str]]:
    return {(f.file, f.field) for f in report.failures}


@pytest.fixture
def people():
    return new_people()


def test_signed_approval_and_waiver_verify(tmp_path, people):
    rel = approve(stage_ready(tmp_path / "1.2.3", people), signer=people.approver)
    report = verify_release(rel.root, require_ready=True, require_signed_approval=True)
    assert report.ok, report.failures
    assert report.counts["signatures"] == 8 + 2  # the release key's, then the approver's and the grantor's
    assert not any("unsigned" in w for w in report.warnings)
    from typer.testing import CliRunner

    from releases.cli import app

    shown = CliRunner().invoke(app, ["show", str(rel.root)])
    assert f"approval: approve by {APPROVER}, signed with key {key_id(people.approver.public_key())}" in shown.stdout


def test_approval_signed_by_an_unlisted_key_is_refused(tmp_path, people):
    intruder = Ed25519PrivateKey.generate()
    rel = approve(stage_ready(tmp_path / "1.2.3", people), signer=intruder)
    report = verify_release(rel.root)
    assert _fields(report) == {("receipts/approval.dsse.json", "payload/predicate/signature")}
    assert f"not signed by {APPROVER}'s listed key {key_id(people.approver.public_key())}" in report.failures[0].message
    assert key_id(intruder.public_key()) in report.failures[0].message


def test_approval_for_another_manifest_digest_is_refused(tmp_path, people):
    rel = approve(stage_ready(tmp_path / "1.2.3", people), signer=people.approver, digest="e" * 64)
    report = verify_release(rel.root)
    assert _fields(report) == {("receipts/approval.dsse.json", "payload/predicate/signature")}
    assert "about manifest " + "e" * 64 in report.failures[0].message


def test_unsigned_approval_is_refused_where_signatures_are_required(tmp_path, people):
    allowed = approve(stage_ready(tmp_path / "a" / "1.2.3", people, allow_unsigned=True), signer=None)
    report = verify_release(allowed.root, require_ready=True)
    assert report.ok, report.failures
    assert any("approval by release-manager is unsigned" in w for w in report.warnings)
    strict = verify_release(allowed.root, require_signed_approval=True)
    assert _fields(strict) == {("receipts/approval.dsse.json", "payload/predicate/signature")}
    assert "--require-signed-approval" in strict.failures[0].message
    not_allowed = approve(stage_ready(tmp_path / "b" / "1.2.3", people, allow_unsigned=False), signer=None)
    report = verify_release(not_allowed.root)
    assert _fields(report) == {("receipts/approval.dsse.json", "payload/predicate/signature")}
    assert "does not allow unsigned approvals" in report.failures[0].message


def test_unlisted_approver_name_is_refused(tmp_path, people):
    rel = approve(stage_ready(tmp_path / "1.2.3", people), signer=people.approver, approver="intruder")
    assert ("receipts/approval.dsse.json", "payload/predicate/approver") in _fields(verify_release(rel.root))


def test_build_approval_checks_the_signature(tmp_path, people):
    rel = stage_ready(tmp_path / "1.2.3", people)
    m, acked = rel.manifest, [w["id"] for w in rel.manifest["waivers"]]
    keys = {APPROVER: people.approver.public_key(), "oncall-lead": None}

    def build(signer, digest=None, allow_unsigned=False, reason="ok"):
        sig = None if signer is None else approval_mod.sign_decision(
            digest or mf.approval_digest(m), decision="approve", approver=APPROVER, reason="ok",
            acknowledged_waivers=acked, private_key=signer)
        return approval_mod.build_approval(m, decision="approve", approver=APPROVER, allowed_approvers=keys,
                                           reason=reason, acknowledged_waivers=acked, flow_run_id="r", signature=sig,
                                           approver_keys=keys, allow_unsigned=allow_unsigned)

    record = build(people.approver)
    assert record["signed"] is True and record["key_id"] == key_id(people.approver.public_key())
    with pytest.raises(ApprovalRefused, match="not signed by release-manager's listed key"):
        build(Ed25519PrivateKey.generate())
    with pytest.raises(ApprovalRefused, match="about manifest"):
        build(people.approver, digest="0" * 64)
    with pytest.raises(ApprovalRefused, match="differs from the submitted one in: reason"):
        build(people.approver, reason="something else")
    with pytest.raises(ApprovalRefused, match="unsigned"):
        build(None)
    unsigned = build(None, allow_unsigned=True)
    assert unsigned["signed"] is False and "key_id" not in unsigned


def test_waiver_signed_by_someone_else_or_edited_is_refused(tmp_path, people):
    rel = approve(stage_ready(tmp_path / "1.2.3", people), signer=people.approver)
    rel_waiver = rel.files["gate-waiver"]
    import json

    waiver = json.loads((rel.root / rel_waiver).read_text())
    grantors = {GRANTOR: people.grantor.public_key()}
    assert check_waiver_signature(waiver, grantors) == key_id(people.grantor.public_key())
    with pytest.raises(RecordError, match="not listed"):
        check_waiver_signature(waiver, {})
    forged = sign_waiver({k: v for k, v in waiver.items() if k != "signature"}, people.approver)
    with pytest.raises(RecordError, match="not signed by grantor oncall-lead's listed key"):
        check_waiver_signature(forged, grantors)
    edited = dict(waiver, measured="0.50 of incumbent")
    with pytest.raises(RecordError, match="differs in: measured"):
        check_waiver_signature(edited, grantors)


def test_verify_refuses_a_waiver_signed_by_an_unlisted_grantor(tmp_path, people):
    # Signed with the approver's key: a real key, but not the one the signers list names for the grantor.
    rel = approve(stage_ready(tmp_path / "1.2.3", people, waiver_signer=people.approver), signer=people.approver)
    report = verify_release(rel.root)
    assert _fields(report) == {(rel.files["gate-waiver"], "signature")}
    assert "not signed by grantor oncall-lead's listed key" in report.failures[0].message


def test_cli_require_signed_approval_exit_codes(tmp_path, people):
    from typer.testing import CliRunner

    from releases.cli import app

    rel = approve(stage_ready(tmp_path / "1.2.3", people, allow_unsigned=True), signer=None)
    base = ["verify", str(rel.root), "--expect-key-id", key_id(rel.public_key), "--require-ready"]
    assert CliRunner().invoke(app, base).exit_code == 0
    strict = CliRunner().invoke(app, base + ["--require-signed-approval"], env={"COLUMNS": "300"})
    assert strict.exit_code == 1 and "unsigned" in strict.stdout

