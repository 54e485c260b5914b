"""verify --require-ready over acceptance: each declared lane's latest window passes and ran the
docs blocks the release ships (an edited block is named, a prose edit is not), and a release that
upgrades an incumbent carries a passing rehearsal. Staged through the real ReleaseStager."""
from __future__ import annotations

import hashlib

import pytest

from releases import keys
from releases.candidate import candidate_ref
from releases.canonical import file_sha256
from releases.docs_blocks import extract
from releases.errors import SchemaError
from releases.receipts import subject
from releases.schema import validate
from tests.releases.fixtures import T0, T1
from tests.releases.test_stage import VERSION, _stage_ready

LANE = "cpu-reference"
DOC = """# Quickstart

Install the release, then ask it something.

## Install

```bash
python3 assay-install.pyz install "$URL" --prefix "$PREFIX"
```

```bash no-run
echo "shown, never run"
```

## Ask

```sh
curl -s http://127.0.0.1:$PORT/v1/engine/status
```
"""


@pytest.fixture
def key(tmp_path):
    path, _ = keys.ensure_local_key(tmp_path / "keys")
    return keys.load_private_key(path)


def _stage_docs(stager, text: str) -> dict:
    """(Re-)stage QUICKSTART.md as the release's docs asset and sum it."""
    path = stager.workspace / "scratch" / "QUICKSTART.md"
    path.write_text(text, encoding="utf-8")
    entry = stager.add_artifact(path, "docs")
    stager.write_sums()
    return entry


def _accept(stager, *, attempt: int = 1, verdict: str = "pass", text: str = DOC, lane: str = LANE,
            held_s: float = 60) -> dict:
    path = next((stager.root / "artifacts").glob("*.whl"))
    name, wheel = path.name, {"sha256": file_sha256(path)}
    passed = verdict == "pass"
    pred = {"candidate": candidate_ref(stager.candidate), "label": f"{lane}-{attempt}", "host": "local",
            "assets": [{"name": name, "sha256": wheel["sha256"]}], "verdict": verdict,
            "routes": [{"name": "quickstart", "status": verdict, "started_at": T0, "ended_at": T1, "facts": {}}],
            "window": {"lease": None, "opened_at": T0, "closed_at": T1, "held_s": held_s, "max_hold_s": 600,
                       "restored": True, "restore_diff": []},
            "lane": lane, "attempt": attempt,
            "docs": {"asset": "QUICKSTART.md", "sha256": hashlib.sha256(text.encode()).hexdigest(),
                     "blocks": [{**b.record(), "exit_status": 0 if passed else 1, "duration_s": 0.5}
                                for b in extract(text)]},
            "downloads": [{"name": name, "sha256": wheel["sha256"], "anonymous": True, "matched": True}],
            "auth": {"authenticated_status": 200, "anonymous_status": 401},
            "behaviour": [{"name": "chat-completion", "passed": passed}],
            "restore": {"restored": True, "audit_passed": True, "checks": []},
            "hold_s": held_s, "max_hold_s": 600}
    return stager.add_receipt("acceptance", [subject(name, wheel["sha256"])], pred, label=f"{lane}/attempt-{attempt}")


def _rehearse(stager, *, from_version: str = "1.2.2", verdict: str = "pass") -> dict:
    passed = verdict == "pass"
    pred = {"candidate": candidate_ref(stager.candidate), "from_version": from_version, "to_version": VERSION,
            "scenarios": [{"name": n, "passed": passed, "duration_s": 3.0, "targets_created": 2, "targets_deleted": 1}
                          for n in ("upgrade", "failed_start_rollback", "interrupted_repair")],
            "verdict": verdict}
    return stager.add_receipt("rehearsal", [subject("candidate", candidate_ref(stager.candidate)["id"])], pred)


def _accepted(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    _stage_docs(stager, DOC)
    _accept(stager)
    return stager


def failures(report) -> list[tuple[str, str, str]]:
    return [(f.file, f.field, f.message) for f in report.failures]


def test_accepted_lane_is_ready_and_declared_in_the_manifest(tmp_path, key):
    stager = _accepted(tmp_path, key)
    manifest = stager.compose(acceptance_lanes=[LANE])
    assert manifest["acceptance"] == {"lanes": [LANE], "incumbent": None}
    docs = [a for a in manifest["artifacts"] if a["kind"] == "docs"]
    assert [a["path"] for a in docs] == ["artifacts/QUICKSTART.md"]
    report = stager.verify(require_ready=True)
    assert failures(report) == []
    assert report.warnings == []


def test_edited_block_makes_the_release_not_ready_naming_the_block(tmp_path, key):
    stager = _accepted(tmp_path, key)
    stager.compose(acceptance_lanes=[LANE])
    _stage_docs(stager, DOC.replace("/v1/engine/status", "/v1/models"))
    stager.compose(acceptance_lanes=[LANE])  # checksums are right again: only the block rule speaks
    report = stager.verify(require_ready=True)
    assert not report.ok
    assert failures(report) == [("artifacts/QUICKSTART.md", "blocks",
                                 f'lane {LANE}: block 1 under "Ask" differs from the accepted one: NOT READY '
                                 "(run the acceptance window again)")]


def test_added_block_is_named_too(tmp_path, key):
    stager = _accepted(tmp_path, key)
    _stage_docs(stager, DOC + "\n## Stop\n\n```bash\nkill \"$PID\"\n```\n")
    report = (stager.compose(acceptance_lanes=[LANE]), stager.verify(require_ready=True))[1]
    assert [m for _, _, m in failures(report)] == [
        f'lane {LANE}: block 2 under "Stop" was added after acceptance: NOT READY (run the acceptance window again)']


def test_prose_only_edit_stays_ready(tmp_path, key):
    stager = _accepted(tmp_path, key)
    _stage_docs(stager, DOC.replace("then ask it something.", "then ask it anything at all.")
                .replace("```bash no-run\necho \"shown, never run\"", "```bash no-run\necho \"still never run\""))
    stager.compose(acceptance_lanes=[LANE])
    report = stager.verify(require_ready=True)
    assert failures(report) == []
    assert report.warnings == [f"artifacts/QUICKSTART.md: changed since the lane {LANE} acceptance window, in prose "
                               "only (every executable block is the accepted one)"]


def test_docs_asset_not_in_the_release_is_not_ready(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    _accept(stager)  # records QUICKSTART.md, which was never staged
    stager.compose(acceptance_lanes=[LANE])
    report = stager.verify(require_ready=True)
    assert [(f, fld) for f, fld, _ in failures(report)] == [
        (f"receipts/acceptance/{LANE}/attempt-1.dsse.json", "payload/predicate/docs/asset")]


def test_missing_acceptance_for_a_declaring_lane_is_not_ready(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    _stage_docs(stager, DOC)
    stager.compose(acceptance_lanes=[LANE])
    report = stager.verify(require_ready=True)
    assert failures(report) == [("manifest.json", "acceptance/lanes/0",
                                 f"lane {LANE} declares an acceptance window but no acceptance receipt records one: "
                                 "NOT READY")]
    assert stager.verify(require_ready=False).ok  # readiness, not integrity


def test_failed_latest_attempt_is_not_ready(tmp_path, key):
    stager = _accepted(tmp_path, key)
    rel = _accept(stager, attempt=2, verdict="fail")["path"]
    stager.compose(acceptance_lanes=[LANE])
    report = stager.verify(require_ready=True)
    assert failures(report) == [(rel, "payload/predicate/verdict",
                                 f"lane {LANE}: the latest acceptance attempt (2) is fail: NOT READY")]


def test_failed_first_attempt_then_corrected_window_is_ready(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    _stage_docs(stager, DOC)
    _accept(stager, attempt=1, verdict="fail", held_s=900)  # over-held: the reason it was corrected
    _accept(stager, attempt=2)
    stager.compose(acceptance_lanes=[LANE])
    assert failures(stager.verify(require_ready=True)) == []


def test_over_held_latest_window_is_not_ready(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    _stage_docs(stager, DOC)
    rel = _accept(stager, held_s=900)["path"]
    stager.compose(acceptance_lanes=[LANE])
    assert {(f, fld) for f, fld, _ in failures(stager.verify(require_ready=True))} == {
        (rel, "payload/predicate/hold_s"), (rel, "payload/predicate/window/held_s")}


def test_rehearsal_is_required_when_an_incumbent_exists(tmp_path, key):
    stager = _accepted(tmp_path, key)
    manifest = stager.compose(acceptance_lanes=[LANE], incumbent={"version": "1.2.2"})
    assert manifest["acceptance"]["incumbent"] == {"version": "1.2.2"}
    report = stager.verify(require_ready=True)
    assert [(f, fld) for f, fld, _ in failures(report)] == [("manifest.json", "acceptance/incumbent")]
    assert "1.2.2 -> 1.2.3" in report.failures[0].message

    _rehearse(stager, verdict="fail")
    stager.compose(acceptance_lanes=[LANE], incumbent={"version": "1.2.2"})
    assert [(f, fld) for f, fld, _ in failures(stager.verify(require_ready=True))] == [
        ("manifest.json", "acceptance/incumbent")]

    _rehearse(stager)
    stager.compose(acceptance_lanes=[LANE], incumbent={"version": "1.2.2"})
    assert failures(stager.verify(require_ready=True)) == []


def test_rehearsal_of_another_upgrade_does_not_count(tmp_path, key):
    stager = _accepted(tmp_path, key)
    _rehearse(stager, from_version="1.0.0")
    stager.compose(acceptance_lanes=[LANE], incumbent={"version": "1.2.2"})
    assert [(f, fld) for f, fld, _ in failures(stager.verify(require_ready=True))] == [
        ("manifest.json", "acceptance/incumbent")]


def test_no_incumbent_needs_no_rehearsal_and_no_declaration_keeps_the_old_manifest(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    manifest = stager.compose()
    assert "acceptance" not in manifest
    assert failures(stager.verify(require_ready=True)) == []


def test_schemas_hold_the_contract(tmp_path, key):
    stager = _accepted(tmp_path, key)
    pred = stager.predicate(stager.receipts[-1])
    broken = {k: v for k, v in pred.items() if k != "docs"}
    with pytest.raises(SchemaError):
        validate("acceptance", broken, "acceptance")
    with pytest.raises(SchemaError):  # a passing window must have restored the host and passed its audit
        validate("acceptance", {**pred, "restore": {"restored": True, "audit_passed": False, "checks": []}}, "a")
    rehearsal = {"candidate": pred["candidate"], "from_version": "1.2.2", "to_version": VERSION, "verdict": "pass",
                 "scenarios": [{"name": "upgrade", "passed": False, "duration_s": 1, "targets_created": 0,
                                "targets_deleted": 0}]}
    with pytest.raises(SchemaError):  # pass with a failed scenario
        validate("rehearsal", rehearsal, "rehearsal")
    validate("rehearsal", {**rehearsal, "verdict": "fail"}, "rehearsal")


def test_published_release_with_acceptance_and_rehearsal_verifies_with_notes(tmp_path, key):
    stager = _accepted(tmp_path, key)
    _rehearse(stager)
    stager.compose(acceptance_lanes=[LANE], incumbent={"version": "1.2.2"})
    approval = stager.record_approval({"decision": "approve", "approver": "ops", "reason": "green"},
                                      allowed_approvers=["ops"], flow_run_id="run-1")
    assert approval.manifest["state"] == "published"
    assert approval.manifest["acceptance"] == {"lanes": [LANE], "incumbent": {"version": "1.2.2"}}
    report = stager.verify(require_ready=True)
    assert failures(report) == []
    assert report.state == "published"
