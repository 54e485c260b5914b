"""Manifest state machine: legal path, refusals, immutability once published."""
from __future__ import annotations

import pytest

from releases import manifest as mf
from releases.errors import ImmutableRelease, RecordError, SchemaError
from releases.release_dir import ReleaseDir

REF = {"id": "a" * 64, "commit": "b" * 40, "tree": "c" * 40}


def test_new_manifest_is_draft():
    m = mf.new_manifest("1.0.0", REF)
    assert m["state"] == "draft" and mf.missing_for(m, "draft") == []
    assert "candidate_record" in mf.missing_for(m, "candidate")


def test_illegal_transitions(ready_release):
    m = mf.new_manifest("1.0.0", REF)
    with pytest.raises(ImmutableRelease, match="draft -> ready"):
        mf.transition(m, "ready")
    with pytest.raises(ImmutableRelease, match="draft -> published"):
        mf.transition(m, "published")
    with pytest.raises(ImmutableRelease, match="ready -> candidate"):
        mf.transition(ready_release.manifest, "candidate")


def test_transition_needs_the_target_fields():
    m = mf.new_manifest("1.0.0", REF)
    with pytest.raises(RecordError, match="cannot move to candidate: missing candidate_record; public_key; receipts: candidate"):
        mf.transition(m, "candidate")


def test_ready_lists_everything_missing(ready_release):
    m = dict(ready_release.manifest, state="candidate")
    m = {k: v for k, v in m.items() if k not in ("sums", "ledger")}
    m["receipts"] = [r for r in m["receipts"] if r["kind"] != "lane"]
    missing = mf.missing_for(m, "ready")
    assert missing == ["sums", "ledger", "receipts: lane"]
    with pytest.raises(RecordError, match="missing sums; ledger; receipts: lane"):
        mf.transition(m, "ready")


def test_schema_enforces_state_fields_too(ready_release):
    m = dict(ready_release.manifest)
    del m["sums"]
    with pytest.raises(SchemaError) as info:
        mf.update(dict(m, state="candidate"), sums=None)  # null is not a file ref
    assert info.value.path == "/sums"
    from releases.schema import validate
    with pytest.raises(SchemaError, match="'sums' is a required property"):
        validate("manifest", m)


def test_identity_changes_only_by_transition(ready_release):
    with pytest.raises(RecordError, match="cannot edit state, version"):
        mf.update(ready_release.manifest, version="2.0", state="draft")


def test_published_is_immutable(published_release):
    m = published_release.manifest
    with pytest.raises(ImmutableRelease, match="published"):
        mf.update(m, waivers=[])
    with pytest.raises(ImmutableRelease, match="published"):
        mf.transition(m, "ready")
    with pytest.raises(ImmutableRelease, match="cannot be rewritten"):
        ReleaseDir(published_release.root).write_manifest(m, published_release.private_key)


def test_publish_needs_an_approval_of_this_manifest(ready_release, published_release):
    m = ready_release.manifest
    approval = dict(published_release.manifest["approval"])
    with pytest.raises(RecordError, match="approval binds another manifest"):
        mf.transition(m, "published", approval=dict(approval, manifest_sha256="e" * 64))
    with pytest.raises(RecordError, match="missing approval"):
        mf.transition(m, "published")
    with pytest.raises(RecordError, match="missing approval: decision approve"):
        mf.transition(m, "published", approval=dict(approval, decision="reject", manifest_sha256=mf.approval_digest(m)))
    with pytest.raises(RecordError, match="only by the transition to published"):
        mf.transition(dict(m, state="candidate"), "ready", approval=approval)


def test_approval_digest_is_stable_across_publication(published_release):
    m = published_release.manifest
    assert mf.approval_digest(m) == m["approval"]["manifest_sha256"]
    ready = {k: v for k, v in m.items() if k != "approval"}
    ready["state"] = "ready"
    assert mf.approval_digest(ready) == mf.approval_digest(m)
