"""Lane evidence end to end without Prefect: evidence made by running gates.qualify on cpu-smoke
(signed with a test lane key) is refused when forged, imported with `assay lanes import`, bound
into a release of a later candidate whose engine bytes are unchanged (an unrelated commit) and
verified there; after one engine file changes, the lane is hardware-pending."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flows import lane_evidence
from flows.config import load_config
from releases.canonical import canonical_json, load_json_bytes
from releases.evidence import EvidenceRefused
from releases.keys import load_public_key, public_pem
from releases.notes.render import render_notes
from releases.receipts import sign_receipt
from releases.signers import build_signers
from releases.verify import verify_release
from tests.flows.evidence_fixture import (LANE, build_candidate, commit, make_evidence, stage_release, wheel_sha,
                                          write_config)

pytestmark = pytest.mark.slow
ASSAY = str(Path(sys.executable).with_name("assay"))
SMOKE_CHAIN = ("preflight", "install", "startup-fit", "protocol", "restart", "benchmark", "restore")


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    return make_evidence(tmp_path_factory.mktemp("lane-evidence"))


def forged(ev, tmp_path) -> Path:
    """A copy of the evidence to tamper with."""
    copy = tmp_path / "forged"
    shutil.copytree(ev.directory, copy)
    return copy


def refusal(cfg_path: Path, directory: Path, sha: str) -> list[str]:
    cfg = load_config(cfg_path)
    with pytest.raises(EvidenceRefused) as caught:
        lane_evidence.import_dir(cfg, cfg.lane(LANE), directory, sha, dry_run=True)
    return caught.value.problems


def test_sound_evidence_is_the_whole_chain_signed_by_the_lane_key(ev, tmp_path):
    cfg = load_config(write_config(tmp_path, ev))
    evidence, stored = lane_evidence.import_dir(cfg, cfg.lane(LANE), ev.directory, wheel_sha(ev.first), dry_run=True)
    assert stored is None and not (tmp_path / "state" / "evidence").exists()
    assert evidence.wheel == {"name": ev.first.wheel.name, "sha256": wheel_sha(ev.first)}
    assert [label for kind, label, _, _ in evidence.receipts] == [f"{LANE}/{p}" for p in SMOKE_CHAIN] + [LANE]
    assert evidence.candidate["commit"] == ev.first.candidate["commit"]


def test_evidence_signed_by_another_key_is_refused(ev, tmp_path):
    other = tmp_path / "other.pub.pem"
    other.write_bytes(public_pem(Ed25519PrivateKey.generate().public_key()))
    cfg_path = write_config(tmp_path, ev)
    cfg_path.write_text(cfg_path.read_text().replace(str(ev.public_key_file), str(other)))
    problems = refusal(cfg_path, ev.directory, wheel_sha(ev.first))
    assert len(problems) == 1 and problems[0].startswith(f"receipts/lane/{LANE}.dsse.json: no valid signature")
    assert "pinned key" in problems[0]


def test_evidence_of_another_wheel_is_refused_naming_both_digests(ev, tmp_path):
    problems = refusal(write_config(tmp_path, ev), ev.directory, "0" * 64)
    assert problems == [f"receipts/lane/{LANE}.dsse.json: the evidence qualifies wheel {ev.first.wheel.name} sha256 "
                        f"{wheel_sha(ev.first)}, the candidate's wheel is sha256 {'0' * 64}"]


def test_a_missing_phase_is_refused(ev, tmp_path):
    copy = forged(ev, tmp_path)
    (copy / "receipts" / "phase" / LANE / "restart.dsse.json").unlink()
    problems = refusal(write_config(tmp_path, ev), copy, wheel_sha(ev.first))
    assert problems == [f"receipts/phase/{LANE}/restart.dsse.json: missing (the lane receipt binds it)"]


def test_a_lane_that_skipped_a_phase_of_its_chain_is_refused(ev, tmp_path):
    # The lane host signs (with its own key) a lane receipt that leaves `restart` out of the chain.
    copy = forged(ev, tmp_path)
    path = copy / "receipts" / "lane" / f"{LANE}.dsse.json"
    stmt = json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))
    pred = stmt["predicate"]
    pred["phases"] = [p for p in pred["phases"] if p["name"] != "restart"]
    pred["phase_receipts"] = [p for p in pred["phase_receipts"] if p["phase"] != "restart"]
    path.write_bytes(canonical_json(sign_receipt("lane", stmt["subject"], pred, ev.lane_key)))
    problems = refusal(write_config(tmp_path, ev), copy, wheel_sha(ev.first))
    assert any("are not the lane's chain" in p and "missing: restart" in p for p in problems), problems
    assert any(p.endswith("restart.dsse.json") and "no receipt binds" in p for p in problems), problems


def test_a_flipped_byte_is_refused(ev, tmp_path):
    copy = forged(ev, tmp_path)
    phase = copy / "receipts" / "phase" / LANE / "protocol.dsse.json"
    data = bytearray(phase.read_bytes())
    data[len(data) // 2] ^= 0x01
    phase.write_bytes(bytes(data))
    problems = refusal(write_config(tmp_path, ev), copy, wheel_sha(ev.first))
    assert len(problems) == 1
    assert problems[0].startswith(f"receipts/phase/{LANE}/protocol.dsse.json: sha256 ")
    assert "the lane receipt binds" in problems[0]
    # A flipped byte in the lane receipt itself: its signature no longer verifies (or it no longer parses).
    copy2 = tmp_path / "forged2"
    shutil.copytree(ev.directory, copy2)
    lane = copy2 / "receipts" / "lane" / f"{LANE}.dsse.json"
    envelope = json.loads(lane.read_text())
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[payload.index(b'"pass"') + 1] ^= 0x20      # "pass" -> "Pass"
    envelope["payload"] = base64.b64encode(bytes(payload)).decode()
    lane.write_text(json.dumps(envelope))
    problems = refusal(write_config(tmp_path, ev), copy2, wheel_sha(ev.first))
    assert len(problems) == 1 and "no valid signature" in problems[0] and "or altered" in problems[0]


def test_assay_lanes_import_stores_verified_evidence_and_refuses_forged(ev, tmp_path):
    cfg_path = write_config(tmp_path, ev)
    ok = subprocess.run([ASSAY, "lanes", "import", str(ev.directory), "--config", str(cfg_path), "--wheel",
                         str(ev.first.wheel)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    stored = tmp_path / "state" / "evidence" / LANE / wheel_sha(ev.first)
    assert f"stored in {stored}" in ok.stdout
    assert sorted(p.relative_to(stored).as_posix() for p in stored.rglob("*.dsse.json")) == sorted(
        [f"receipts/lane/{LANE}.dsse.json"] + [f"receipts/phase/{LANE}/{p}.dsse.json" for p in SMOKE_CHAIN])
    dry = subprocess.run([ASSAY, "lanes", "import", str(ev.directory), "--config", str(cfg_path), "--dry-run",
                          "--wheel-sha256", "f" * 64], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 1 and "the candidate's wheel is sha256 " + "f" * 64 in dry.stderr
    assert "Traceback" not in dry.stderr


def test_unrelated_commit_binds_the_evidence_and_an_engine_change_makes_the_lane_hardware_pending(ev, tmp_path):
    cfg = load_config(write_config(tmp_path, ev))
    lane = cfg.lane(LANE)

    # An unrelated commit: another candidate, the same wheel bytes, so the evidence binds.
    commit(ev.repo, "README.md", "changed outside the engine\n", "2026-02-03T04:05:06+00:00")
    second = build_candidate(ev.repo, tmp_path / "second", twice=True)
    assert second.candidate["commit"] != ev.first.candidate["commit"]
    assert wheel_sha(second) == wheel_sha(ev.first)
    status, evidence = lane_evidence.resolve(cfg, lane, wheel_sha(second))
    assert status == lane_evidence.BOUND
    staged = stage_release(tmp_path / "ws-bound", second, tmp_path / "release-keys")
    signer = lane.public_key
    entry = staged.add_lane_evidence(evidence, load_public_key(signer), optional=False)
    assert entry["status"] == "bound" and entry["candidate"]["commit"] == ev.first.candidate["commit"]
    ref = staged.candidate
    signers = build_signers(_ref(ref), approvers={"local-operator": None}, allow_unsigned_approval=True,
                            lanes=cfg.lane_keys)
    manifest = staged.compose(signers=signers)
    assert manifest["lane_evidence"] == [entry]
    report = staged.verify(require_ready=True)
    assert report.ok, report.failures
    # Without the lane's key in signers.json, the lane receipts do not verify under the release key.
    bare = stage_release(tmp_path / "ws-bare", second, tmp_path / "release-keys")
    bare.add_lane_evidence(evidence, load_public_key(signer))
    bare.compose(signers=build_signers(_ref(ref), approvers={"local-operator": None}, allow_unsigned_approval=True))
    failures = [str(f) for f in verify_release(bare.root, public_key=bare.public_key, require_ready=True).failures]
    assert any("pins no key" in f for f in failures) and any("no valid signature" in f for f in failures), failures
    notes = render_notes(staged.root)
    assert "Lane evidence" in notes and wheel_sha(second) in notes

    # One engine file changes: new wheel bytes, the evidence is of the old ones: hardware-pending.
    commit(ev.repo, "engine/errors.py", (ev.repo / "engine/errors.py").read_text() + "\n# changed\n",
           "2026-03-04T05:06:07+00:00")
    third = build_candidate(ev.repo, tmp_path / "third", twice=True)
    assert wheel_sha(third) != wheel_sha(ev.first)
    status, evidence = lane_evidence.resolve(cfg, lane, wheel_sha(third))
    assert status == lane_evidence.PENDING and evidence.wheel["sha256"] == wheel_sha(ev.first)
    reason = lane_evidence.pending_reason(evidence, third.wheel)
    assert wheel_sha(ev.first) in reason and wheel_sha(third) in reason
    for optional in (False, True):
        staged = stage_release(tmp_path / f"ws-pending-{optional}", third, tmp_path / "release-keys")
        _in_place_lane(staged, third)
        staged.add_lane_pending(evidence, load_public_key(signer), optional=optional, reason=reason)
        staged.compose(signers=build_signers(_ref(staged.candidate), approvers={"local-operator": None},
                                             allow_unsigned_approval=True, lanes=cfg.lane_keys))
        report = staged.verify(require_ready=True)
        if optional:
            assert report.ok, report.failures
            assert any(f"lane {LANE} is hardware-pending" in w for w in report.warnings)
            assert "hardware-pending" in render_notes(staged.root)
        else:
            assert [f.field for f in report.failures] == ["lane_evidence/0/status"]
            assert "hardware-pending" in report.failures[0].message and "not optional" in report.failures[0].message


def _ref(candidate: dict) -> dict:
    from releases.candidate import candidate_ref
    return candidate_ref(candidate)


def _in_place_lane(staged, built) -> None:
    """A lane run in place for this candidate, signed by the release key. The record is synthetic (a
    real in-place lane is tests/gates/test_qualify_smoke.py); what is tested here is the pending one."""
    wheel = {"name": built.wheel.name, "sha256": wheel_sha(built)}
    record = {"candidate": _ref(built.candidate), "lane": "local-smoke", "kind": "cpu-smoke", "host": "local",
              "artifact": wheel, "verdict": "pass",
              "phases": [{"name": "install", "status": "pass", "started_at": "2026-01-01T00:00:00Z",
                          "ended_at": "2026-01-01T00:00:01Z", "facts": {}}],
              "window": {"lease": None, "restored": True, "restore_diff": []}}
    staged.add_receipt("lane", [{"name": wheel["name"], "digest": {"sha256": wheel["sha256"]}}], record, label="local-smoke")
    assert load_json_bytes((staged.root / "receipts/lane/local-smoke.dsse.json").read_bytes())
