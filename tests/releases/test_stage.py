"""The ReleaseStager: a release staged through one object, from candidate to a published,
verified directory; receipts of any known kind keep their kind and label all the way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gates.stats import judge
from releases import keys
from releases.candidate import candidate_ref
from releases.errors import RecordError
from releases.receipts import subject
from releases.release_dir import ReleaseDir
from releases.stage import ReleaseStager
from releases.stores import LocalStore
from releases.verify import verify_release
from tests.gates.stats.inputs import abba_case, even
from tests.releases.fixtures import T0, T1, candidate_record, make_sboms, make_sdist, make_wheel

VERSION = "1.2.3"


def _stage_ready(workspace: Path, key) -> ReleaseStager:
    stager = ReleaseStager(workspace, key)
    record = candidate_record(VERSION)
    ref = stager.add_candidate(record)
    scratch = workspace / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    wheel = make_wheel(scratch / f"assay_engine-{VERSION}-py3-none-any.whl", VERSION)
    sdist = make_sdist(scratch / f"assay_engine-{VERSION}.tar.gz", VERSION)
    arts = [stager.add_artifact(wheel, "wheel"), stager.add_artifact(sdist, "sdist")]
    spdx, cdx = make_sboms(scratch, VERSION, {"wheel": wheel, "sdist": sdist})
    stager.add_sbom(spdx, "spdx-2.3")
    stager.add_sbom(cdx, "cyclonedx-1.5")
    stager.write_sums()
    subjects = [subject(Path(a["path"]).name, a["sha256"]) for a in arts]
    for label in ("a", "b"):
        stager.add_receipt("build", subjects, {
            "buildDefinition": {"buildType": "https://assay.dev/build/wheel-sdist/v1",
                                "externalParameters": {"candidate": ref, "targets": ["wheel", "sdist"]},
                                "internalParameters": {"environment": {}, "varied": {}},
                                "resolvedDependencies": [{"uri": "git+engine", "digest": {"gitCommit": record["commit"]}}]},
            "runDetails": {"builder": {"id": f"https://assay.dev/builders/{label}"},
                           "metadata": {"invocationId": label, "startedOn": T0, "finishedOn": T1}, "byproducts": []}},
            label=label)
    stager.add_receipt("reproducibility", subjects, {
        "candidate": ref, "builds": ["a", "b"], "verdict": "reproducible", "difference_count": 0, "waived": [],
        "unexplained": 0, "files": [{"name": Path(a["path"]).name, "a_sha256": a["sha256"], "b_sha256": a["sha256"],
                                     "identical": True, "differences": []} for a in arts]})
    stager.add_receipt("lane", subjects[:1], {
        "candidate": ref, "lane": "cpu-reference", "host": "local", "verdict": "pass",
        "artifact": {"name": subjects[0]["name"], "sha256": subjects[0]["digest"]["sha256"]},
        "phases": [{"name": "install", "status": "pass", "started_at": T0, "ended_at": T1, "facts": {}}],
        "window": {"lease": None, "restored": True, "restore_diff": []}}, label="cpu-reference")
    verdict = judge("abba", {"candidate": ref, "cases": [abba_case("c1", even(100.0, 101.0)),
                                                         abba_case("c2", even(100.0, 99.5))]})
    stager.add_receipt("verdict-abba", subjects[:1], verdict, label="cpu-reference")
    return stager


@pytest.fixture
def key(tmp_path):
    path, _ = keys.ensure_local_key(tmp_path / "keys")
    return keys.load_private_key(path)


def test_a_verdict_receipt_with_a_dashed_kind_is_composed_published_verified_and_shown(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    manifest = stager.compose()
    abba = [r for r in manifest["receipts"] if r["kind"] == "verdict-abba"]
    assert abba == [{"kind": "verdict-abba", "label": "cpu-reference",
                     "path": "receipts/verdict-abba/cpu-reference.dsse.json", "sha256": abba[0]["sha256"]}]
    assert stager.verify(require_ready=True).failures == []

    approval = stager.record_approval({"decision": "approve", "approver": "ops", "reason": "green"},
                                      allowed_approvers=["ops"], flow_run_id="run-1")
    assert approval.manifest["state"] == "published"
    assert sorted(n["format"] for n in approval.manifest["notes"]) == ["html", "md"]
    assert "verdict-abba" in (stager.root / "notes" / "RELEASE-NOTES.md").read_text()
    result = stager.publish(LocalStore(tmp_path / "store"))
    published = tmp_path / "store" / VERSION
    assert result.report.ok and result.version == VERSION
    report = verify_release(published, public_key=key.public_key(), require_ready=True)
    assert report.ok, report.failures
    assert report.counts["receipts"] == 6

    from flows.cli import app

    shown = CliRunner().invoke(app, ["release", "show", str(published), "--key",
                                     str(tmp_path / "keys" / "release.pub.pem")], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.output.splitlines() if "verdict-abba" in line)
    assert "cpu-reference" in row and "receipts/verdict-abba/cpu-reference.dsse.json" in row


def test_the_index_survives_a_new_stager_and_a_retried_step_replaces_its_entry(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    again = ReleaseStager(tmp_path / "ws", key)
    assert again.receipts == stager.receipts
    first = [r for r in again.receipts if r["kind"] == "lane"]
    ref = candidate_ref(again.candidate)
    again.add_receipt("lane", [subject("w", "0" * 64)], {
        "candidate": ref, "lane": "cpu-reference", "host": "local", "verdict": "fail",
        "artifact": {"name": "w", "sha256": "0" * 64},
        "phases": [{"name": "install", "status": "fail", "started_at": T0, "ended_at": T1, "facts": {}}],
        "window": {"lease": None, "restored": True, "restore_diff": []}}, label="cpu-reference")
    lanes = [r for r in ReleaseStager(tmp_path / "ws", key).receipts if r["kind"] == "lane"]
    assert len(lanes) == 1 and lanes[0]["sha256"] != first[0]["sha256"]


def test_unknown_kinds_bad_labels_and_other_candidates_are_refused(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    with pytest.raises(RecordError, match="unknown receipt kind 'verdict-vibes'"):
        stager.add_receipt("verdict-vibes", [], {})
    with pytest.raises(RecordError, match="receipt label"):
        ReleaseDir(tmp_path / "x").add_receipt("lane", {}, label="../escape")
    other = ReleaseStager(tmp_path / "other", key)
    other_ref = other.add_candidate(candidate_record("9.9.9", commit="3" * 40))
    foreign = json.loads((other.root / other.receipts[0]["path"]).read_text())
    with pytest.raises(RecordError, match="another candidate"):
        stager.add_signed_receipt("candidate", foreign, label="foreign")
    assert other_ref["id"] != candidate_ref(stager.candidate)["id"]


def test_a_rejection_is_signed_but_publishes_nothing(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    stager.compose()
    decision = stager.record_approval({"decision": "reject", "approver": "ops", "reason": "no"},
                                      allowed_approvers=["ops"], flow_run_id="run-1")
    assert decision.manifest is None and decision.record["decision"] == "reject"
    assert stager.manifest()["state"] == "ready"


def test_compose_refuses_a_ledger_with_an_open_in_scope_p1_and_binds_it_once_deferred(tmp_path, key):
    from releases.ledger import new_ledger
    from releases.ledger_edits import add_item, close, disposition, dispose

    stager = _stage_ready(tmp_path / "ws", key)
    ref = candidate_ref(stager.candidate)
    ledger = add_item(new_ledger(ref, review_id="rv-1", base="0" * 40), id="P1-race", title="lease race",
                      priority="P1")
    with pytest.raises(RecordError, match="P1-race"):
        stager.compose(ledger=ledger)
    assert not (stager.root / "manifest.json").exists()
    ledger = dispose(ledger, "P1-race", disposition("deferred", issue="#42"))
    ledger = close(ledger, by="lead", statement="deferred with an issue")
    manifest = stager.compose(ledger=ledger)
    assert json.loads((stager.root / manifest["ledger"]["path"]).read_text())["review_id"] == "rv-1"
    assert stager.verify(require_ready=True).failures == []
