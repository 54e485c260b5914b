"""Approval, waivers and ledger: building, approver list, and refusing another candidate's records."""
from __future__ import annotations

import pytest

from releases.approval import build_approval, check_approver
from releases.errors import ApprovalRefused, RecordError, SchemaError
from releases.manifest import approval_digest
from releases.waivers import bind_waiver, build_waiver
from tests.releases.fixtures import APPROVERS, T1

OTHER = {"id": "f" * 64, "commit": "9" * 40, "tree": "8" * 40}


def test_approver_not_on_list_is_refused():
    check_approver("release-manager", APPROVERS)
    with pytest.raises(ApprovalRefused) as info:
        check_approver("intruder", APPROVERS)
    assert info.value.approver == "intruder" and info.value.allowed == APPROVERS
    assert "'intruder'" in str(info.value) and "release-manager, oncall-lead" in str(info.value)
    with pytest.raises(ApprovalRefused, match="<empty>"):
        check_approver("release-manager", [])


def _approve(m, **kw):
    args = dict(decision="approve", approver="release-manager", allowed_approvers=APPROVERS, reason="ok",
                acknowledged_waivers=["lane-latency-p99"], flow_run_id="run-1", decided_at=T1)
    args.update(kw)
    return build_approval(m, **args)


def test_approval_binds_the_ready_manifest(ready_release):
    rec = _approve(ready_release.manifest)
    assert rec["manifest_sha256"] == approval_digest(ready_release.manifest)
    assert rec["candidate"] == ready_release.candidate_ref


def test_approval_refusals(ready_release, published_release):
    with pytest.raises(ApprovalRefused, match="not acknowledged: lane-latency-p99"):
        _approve(ready_release.manifest, acknowledged_waivers=[])
    assert _approve(ready_release.manifest, decision="reject", acknowledged_waivers=[])["decision"] == "reject"
    with pytest.raises(ApprovalRefused, match="only a ready manifest"):
        _approve(published_release.manifest)
    with pytest.raises(ApprovalRefused, match="'nobody'"):
        _approve(ready_release.manifest, approver="nobody")


def test_waiver_about_another_candidate_is_refused(ready_release):
    w = build_waiver(ready_release.candidate_ref, id="w1", scope="reproducibility", subject="x.whl:RECORD",
                     measured="mtime differs", approved_by="oncall-lead", reason="zip mtime")
    assert bind_waiver(w, ready_release.candidate_ref) is w
    with pytest.raises(RecordError, match="waiver record names another candidate") as info:
        bind_waiver(w, OTHER)
    assert info.value.where == "waivers/w1.json"
    with pytest.raises(SchemaError) as info:
        build_waiver(ready_release.candidate_ref, id="w1", scope="everything", subject="s", measured="m",
                     approved_by="a", reason="r")
    assert info.value.path == "/scope"

