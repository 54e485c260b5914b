"""verify_release on a complete synthetic release, then on every kind of damage."""
from __future__ import annotations

import copy
import json

import pytest

from releases import manifest as mf
from releases.canonical import canonical_json, load_json_bytes, sha256_hex
from releases.keys import load_public_key
from releases.receipts import open_receipt, sign_receipt
from releases.release_dir import ReleaseDir, write_bytes
from releases.verify import verify_release
from tests.releases.fixtures import build_release


def files_failing(report) -> set[str]:
    return {f.file for f in report.failures}


def test_complete_published_release_verifies(published_release):
    report = verify_release(published_release.root, require_ready=True)
    assert report.failures == []
    assert report.ok and report.state == "published"
    assert report.counts["signatures"] == 8  # manifest.sig + 7 receipts
    assert report.counts["artifacts"] == 2


def test_ready_release_verifies_ready(ready_release):
    report = verify_release(ready_release.root, require_ready=True)
    assert report.ok, report.failures
    assert report.state == "ready"


TAMPER_ROLES = ["artifact", "artifact-sdist", "sbom", "sbom-cdx", "sums", "receipt-candidate", "receipt-build-a",
                "receipt-build-b", "receipt-reproducibility", "receipt-lane-h200", "receipt-acceptance",
                "receipt-approval", "manifest.sig", "manifest.json", "candidate.json", "ledger", "waiver", "public-key"]


@pytest.mark.parametrize("role", TAMPER_ROLES)
def test_one_flipped_byte_fails_naming_the_file(published_release, role):
    rel = published_release.files[role]
    path = published_release.root / rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    report = verify_release(published_release.root, require_ready=True)
    assert not report.ok
    assert rel in files_failing(report), report.failures


def test_extra_file_is_named(published_release):
    (published_release.root / "notes.txt").write_text("hello\n")
    (published_release.root / "artifacts" / "extra.whl").write_bytes(b"PK")
    report = verify_release(published_release.root)
    assert {"notes.txt", "artifacts/extra.whl"} <= files_failing(report)
    sums_failures = [f for f in report.failures if f.file == "SHA256SUMS"]
    assert [f.field for f in sums_failures] == ["artifacts/extra.whl"]


@pytest.mark.parametrize("role", ["ledger", "artifact", "receipt-lane-h200"])
def test_missing_file_is_named(published_release, role):
    rel = published_release.files[role]
    (published_release.root / rel).unlink()
    report = verify_release(published_release.root)
    missing = [f for f in report.failures if f.file == rel and "missing" in f.message]
    assert missing, report.failures


def _rebind(rel_obj, rel: str, new_bytes: bytes) -> None:
    """Replace a file and re-sign a ready manifest over it, so only the content check can object."""
    m = rel_obj.manifest
    write_bytes(rel_obj.root / rel, new_bytes)
    sha = sha256_hex(new_bytes)
    fields = {}
    for key in ("receipts", "waivers"):
        if any(e["path"] == rel for e in m.get(key, [])):
            fields[key] = [dict(e, sha256=sha) if e["path"] == rel else e for e in m[key]]
    for key in ("ledger", "candidate_record"):
        if m.get(key, {}).get("path") == rel:
            fields[key] = dict(m[key], sha256=sha)
    ReleaseDir(rel_obj.root).write_manifest(mf.update(m, **fields), rel_obj.private_key)


def _resign_receipt(rel_obj, rel: str, kind: str, change) -> None:
    env = load_json_bytes((rel_obj.root / rel).read_bytes())
    stmt, pred = open_receipt(env, rel_obj.public_key, kind)
    pred = copy.deepcopy(pred)
    change(pred)
    _rebind(rel_obj, rel, canonical_json(sign_receipt(kind, stmt["subject"], pred, rel_obj.private_key)))


@pytest.mark.parametrize("role, kind, change, field", [
    ("receipt-lane-h200", "lane", lambda p: p["candidate"].update(commit="3" * 40), "payload/predicate/candidate"),
    ("receipt-build-b", "build", lambda p: p["buildDefinition"]["externalParameters"]["candidate"].update(tree="3" * 40),
     "payload/predicate/buildDefinition/externalParameters/candidate"),
    ("receipt-reproducibility", "reproducibility", lambda p: p["candidate"].update(id="3" * 64),
     "payload/predicate/candidate"),
    ("receipt-candidate", "candidate", lambda p: p.update(commit="3" * 40), "payload/predicate"),
])
def test_receipt_about_another_candidate_is_refused(ready_release, role, kind, change, field):
    rel = ready_release.files[role]
    _resign_receipt(ready_release, rel, kind, change)
    report = verify_release(ready_release.root, require_ready=True)
    assert [(f.file, f.field) for f in report.failures] == [(rel, field)]
    assert "another candidate" in report.failures[0].message


def test_waiver_about_another_candidate_is_refused(ready_release):
    rel = ready_release.files["waiver"]
    waiver = json.loads((ready_release.root / rel).read_text())
    waiver["candidate"]["id"] = "f" * 64
    _rebind(ready_release, rel, canonical_json(waiver))
    report = verify_release(ready_release.root)
    assert [(f.file, f.field) for f in report.failures] == [(rel, "candidate")]


def test_private_marker_in_a_record_is_named(ready_release):
    rel = ready_release.files["receipt-lane-h200"]
    _resign_receipt(ready_release, rel, "lane",
                    lambda p: p["phases"][0]["facts"].update(log="/home/builder/run.log"))
    report = verify_release(ready_release.root)
    assert [(f.file, f.field) for f in report.failures] == [(rel, "/payload/predicate/phases/0/facts/log")]
    assert "home directory" in report.failures[0].message


@pytest.mark.parametrize("secret, name", [
    ("AKIAABCDEFGHIJKLMNOP", "cloud access key id"),
    ("ghp_" + "a" * 36, "GitHub token"),
    ("xoxb-1234567890-abc", "Slack token"),
    ("sk-" + "A1b2" * 6, "API secret key"),
    ("-----BEGIN PRIVATE KEY-----", "PEM private key"),
    ("aws_secret_access_key=abc", "cloud secret key"),
    ("/root/.ssh", "home directory"),
    ("/Users/someone/src", "home directory"),
])
def test_secrets_in_ledger_are_named(ready_release, secret, name):
    rel = ready_release.files["ledger"]
    ledger = json.loads((ready_release.root / rel).read_text())
    ledger["items"][0]["note_hint"] = secret  # schema failure too; the scan must still name the field
    _rebind(ready_release, rel, canonical_json(ledger))
    report = verify_release(ready_release.root)
    hits = [f for f in report.failures if f.file == rel and f.field == "/items/0/note_hint"]
    assert hits and name in hits[0].message


def test_extra_private_strings_are_scanned(published_release):
    report = verify_release(published_release.root, private_markers=["GPU-LANE-1"])
    assert not report.ok
    fields = {(f.file, f.field) for f in report.failures}
    assert (published_release.files["receipt-lane-h200"], "/payload/predicate/host") in fields


def test_failed_lane_is_not_ready(ready_release):
    rel = ready_release.files["receipt-lane-h200"]
    _resign_receipt(ready_release, rel, "lane", lambda p: p.update(verdict="fail"))
    assert verify_release(ready_release.root).ok  # consistent records, only readiness objects
    report = verify_release(ready_release.root, require_ready=True)
    assert (rel, "payload/predicate/verdict") in {(f.file, f.field) for f in report.failures}
    assert ("manifest.json", "receipts") in {(f.file, f.field) for f in report.failures}


def test_waived_reproducibility_needs_a_bound_waiver(ready_release):
    rel = ready_release.files["receipt-reproducibility"]
    _resign_receipt(ready_release, rel, "reproducibility", lambda p: p.update(verdict="waived", waived=["nope"]))
    report = verify_release(ready_release.root, require_ready=True)
    assert [(f.file, f.field) for f in report.failures] == [(rel, "payload/predicate/waived")]


def test_another_key_fails_every_signature(published_release, tmp_path):
    other = build_release(tmp_path / "other", key_dir=tmp_path / "other-key")
    report = verify_release(published_release.root, public_key=other.public_key)
    failing = {(f.file, f.field) for f in report.failures}
    assert ("manifest.json", "public_key/key_id") in failing
    assert ("manifest.sig", "signatures") in failing
    assert (published_release.files["receipt-build-a"], "signatures") in failing


def test_given_key_file_is_used(published_release):
    pem = published_release.root / "keys" / "release.pub.pem"
    assert verify_release(published_release.root, public_key=pem).ok
    assert verify_release(published_release.root, public_key=load_public_key(pem)).ok


def test_not_a_release_directory(tmp_path):
    report = verify_release(tmp_path)
    assert not report.ok
    assert report.failures[0].file == "manifest.json"


def test_symlink_is_refused(published_release, tmp_path):
    rel = published_release.files["ledger"]
    target = tmp_path / "elsewhere.json"
    target.write_bytes((published_release.root / rel).read_bytes())
    (published_release.root / rel).unlink()
    (published_release.root / rel).symlink_to(target)
    report = verify_release(published_release.root)
    assert any(f.file == rel and "symbolic link" in f.message for f in report.failures)


def test_duplicate_path_in_manifest(ready_release):
    m = ready_release.manifest
    dup = mf.update(m, waivers=m["waivers"] + [dict(m["waivers"][0], id="again")])
    ReleaseDir(ready_release.root).write_manifest(dup, ready_release.private_key)
    report = verify_release(ready_release.root)
    assert any(f.file == "manifest.json" and "twice" in f.message for f in report.failures)


def test_overheld_acceptance_window_is_not_ready(ready_release):
    rel = ready_release.files["receipt-acceptance"]
    _resign_receipt(ready_release, rel, "acceptance", lambda p: p["window"].update(held_s=4000))
    assert verify_release(ready_release.root).ok
    report = verify_release(ready_release.root, require_ready=True)
    assert [(f.file, f.field) for f in report.failures] == [(rel, "payload/predicate/window/held_s")]


def test_reproducibility_must_compare_every_shipped_artifact(ready_release):
    rel = ready_release.files["receipt-reproducibility"]
    _resign_receipt(ready_release, rel, "reproducibility", lambda p: p.update(files=p["files"][:1]))
    report = verify_release(ready_release.root)
    assert [(f.file, f.field) for f in report.failures] == [(rel, "payload/predicate/files")]
    assert "assay_engine-1.2.3.tar.gz" in report.failures[0].message


def test_waived_reproducibility_with_bound_waiver_is_ready(ready_release):
    from releases.waivers import build_waiver

    waiver = build_waiver(ready_release.candidate_ref, id="zip-mtime", scope="reproducibility",
                          subject="assay_engine-1.2.3-py3-none-any.whl:RECORD", measured="mtime differs by 1s",
                          approved_by="oncall-lead", reason="zip timestamps rounded")
    entry = ReleaseDir(ready_release.root).add_waiver(waiver)
    m = ready_release.manifest
    ready_release.manifest = mf.update(m, waivers=m["waivers"] + [entry])
    rel = ready_release.files["receipt-reproducibility"]
    _resign_receipt(ready_release, rel, "reproducibility", lambda p: p.update(verdict="waived", waived=["zip-mtime"]))
    report = verify_release(ready_release.root, require_ready=True)
    assert report.ok, report.failures


def _resubject(rel_obj, rel: str, kind: str, change) -> None:
    env = load_json_bytes((rel_obj.root / rel).read_bytes())
    stmt, pred = open_receipt(env, rel_obj.public_key, kind)
    subjects = copy.deepcopy(stmt["subject"])
    change(subjects)
    _rebind(rel_obj, rel, canonical_json(sign_receipt(kind, subjects, pred, rel_obj.private_key)))


def test_a_subject_outside_the_artifacts_is_not_taken_for_the_artifact_of_its_file_name(ready_release):
    """A judged verdict names the incumbent's wheel as `incumbent/<wheel>`; its file name may equal the
    candidate wheel's, its digest does not: that is no mismatch. A bare name is the release's artifact."""
    rel = ready_release.files["receipt-build-b"]
    wheel = next(a["path"] for a in ready_release.manifest["artifacts"] if a["path"].endswith(".whl"))
    name = wheel.rsplit("/", 1)[-1]
    _resubject(ready_release, rel, "build", lambda s: s.append({"name": f"incumbent/{name}", "digest": {"sha256": "e" * 64}}))
    assert verify_release(ready_release.root, require_ready=True).ok
    _resubject(ready_release, rel, "build", lambda s: s.append({"name": name, "digest": {"sha256": "e" * 64}}))
    report = verify_release(ready_release.root, require_ready=True)
    assert [f.file for f in report.failures] == [rel] and "digest differs from the artifact" in report.failures[0].message
