"""Phase and lane receipts: signed, schema-valid, file names one-to-one with labels, a passed
receipt found again only for the same candidate, artifact and key, and host paths refused."""

from __future__ import annotations

import json

import pytest

from gates.phase_receipts import ReceiptWriter, entry, phase_file
from gates.phases import PhaseOutcome
from releases.errors import RecordError
from releases.keys import ensure_local_key, load_private_key
from releases.receipts import open_receipt

REF = {"id": "c" * 64, "commit": "a" * 40, "tree": "b" * 40}
ART = {"name": "assay_engine-0.1.0-py3-none-any.whl", "sha256": "d" * 64}


def _writer(tmp_path, key, candidate=REF, lane="cpu-smoke"):
    return ReceiptWriter(tmp_path, key, candidate=candidate, lane=lane, kind="cpu-smoke", host="local",
                         artifact=ART, run_id="qualify-test")


def _outcome(name, status="pass", **facts):
    return PhaseOutcome(name, status, "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z", {"seconds": 2.0, **facts})


def test_phase_receipt_is_signed_and_found_again(tmp_path, signing_key):
    w = _writer(tmp_path, signing_key)
    written = w.write_phase(_outcome("protocol", passed=21))
    assert written.label == "cpu-smoke/protocol" and written.relpath == "receipts/phase/cpu-smoke/protocol.dsse.json"
    stmt, pred = open_receipt(json.loads(written.path.read_bytes()), signing_key.public_key(), "phase")
    assert stmt["subject"] == [{"name": ART["name"], "digest": {"sha256": ART["sha256"]}}]
    assert pred["candidate"] == REF and pred["label"] == "cpu-smoke/protocol" and pred["facts"]["passed"] == 21
    outcome, again = w.passed("protocol")
    assert outcome.facts["passed"] == 21 and again.sha256 == written.sha256
    assert entry(written) == {"phase": "protocol", "label": "cpu-smoke/protocol", "path": written.relpath,
                              "sha256": written.sha256}


def test_only_a_passed_receipt_of_the_same_candidate_and_key_counts(tmp_path, signing_key):
    w = _writer(tmp_path, signing_key)
    w.write_phase(_outcome("context", "fail", reason="exact retrieval at 2 of 3 depths"))
    assert w.passed("context") is None
    w.write_phase(_outcome("install"))
    other = _writer(tmp_path, signing_key, candidate={**REF, "id": "e" * 64})
    assert other.passed("install") is None
    stranger = load_private_key(ensure_local_key(tmp_path / "other-keys")[0])
    assert _writer(tmp_path, stranger).passed("install") is None
    # A tampered envelope does not verify: the phase would run again.
    path = tmp_path / phase_file("cpu-smoke", "install")
    env = json.loads(path.read_bytes())
    env["payload"] = env["payload"][:-8] + "AAAAAAA="
    path.write_text(json.dumps(env))
    assert w.passed("install") is None


def test_file_names_cannot_collide_across_lanes(tmp_path):
    assert phase_file("x", "pressure-protocol") != phase_file("x-pressure", "protocol")


def test_host_paths_are_refused_before_signing(tmp_path, signing_key):
    w = _writer(tmp_path, signing_key)
    with pytest.raises(RecordError, match="/facts/log"):
        w.write_phase(_outcome("install", log="see /home/someone/work/serve.log"))
    assert not (tmp_path / "receipts" / "phase" / "cpu-smoke" / "install.dsse.json").exists()


def test_lane_receipt_validates_its_window_and_phase_bindings(tmp_path, signing_key):
    w = _writer(tmp_path, signing_key)
    phase = w.write_phase(_outcome("preflight"))
    audit = {"ok": True, "checks": [{"name": "processes", "status": "pass", "detail": "none"}]}
    record = {"candidate": REF, "lane": "cpu-smoke", "kind": "cpu-smoke", "host": "local", "artifact": ART,
              "verdict": "pass", "phases": [_outcome("preflight").as_record()], "phase_receipts": [entry(phase)],
              "window": {"lease": {"path_sha256": "f" * 64}, "restored": True, "restore_diff": [], "held_s": 3.5,
                         "max_hold_s": 600, "audit": audit}}
    lane = w.write_lane(record)
    _, pred = open_receipt(json.loads(lane.path.read_bytes()), signing_key.public_key(), "lane")
    assert pred["phase_receipts"][0]["sha256"] == phase.sha256
    failing = {**record, "window": {**record["window"], "audit": {**audit, "ok": False}}}
    with pytest.raises(RecordError):
        w.write_lane(failing)    # a pass needs a passing audit (schema)
