"""The rehearsal run for real: two signed releases whose wheel is the real engine, installed,
started on the reference model, upgraded, rolled back and repaired on the local host."""
from __future__ import annotations

import pytest

from gates.rehearsal import rehearse
from tests.releases.installable import MODEL, engine_members, installable_release, public_key

pytestmark = pytest.mark.slow

SCENARIO_KEYS = {"name", "passed", "duration_s", "targets_created", "targets_deleted"}


def test_rehearsal_passes_all_three_scenarios(tmp_path):
    assert (MODEL / "config.json").exists(), "the reference model is missing: run `make model`"
    members = engine_members(tmp_path / "wheel")
    old = installable_release(tmp_path / "rel-old", "1.0.0", tmp_path / "keys", members)
    new = installable_release(tmp_path / "rel-new", "1.1.0", tmp_path / "keys", members)
    predicate, details = rehearse(str(old.root), str(new.root), candidate_ref=new.candidate_ref,
                                  key=public_key(tmp_path / "keys"), model=MODEL, workdir=tmp_path / "rehearsal",
                                  from_version="1.0.0", to_version="1.1.0")
    assert predicate["verdict"] == "pass", details
    assert set(predicate) == {"candidate", "from_version", "to_version", "scenarios", "verdict"}
    assert predicate["candidate"] == new.candidate_ref
    by_name = {s["name"]: s for s in predicate["scenarios"]}
    assert list(by_name) == ["upgrade", "failed_start_rollback", "interrupted_repair"]
    for s in predicate["scenarios"]:
        assert set(s) == SCENARIO_KEYS and s["passed"] is True and s["duration_s"] > 0
    for name in by_name:
        assert details[name]["checks"] and all(details[name]["checks"].values()), details
    # The failed start created the candidate's targets and deleted every one of them.
    rollback = by_name["failed_start_rollback"]
    assert rollback["targets_created"] == rollback["targets_deleted"] >= 3
    assert by_name["upgrade"]["targets_created"] >= 3 and by_name["upgrade"]["targets_deleted"] == 0
    assert by_name["interrupted_repair"]["targets_deleted"] >= 1


def test_a_broken_candidate_fails_the_rehearsal(tmp_path):
    """A candidate that cannot be verified: every scenario fails and the verdict says so."""
    members = engine_members(tmp_path / "wheel")
    old = installable_release(tmp_path / "rel-old", "1.0.0", tmp_path / "keys", members)
    new = installable_release(tmp_path / "rel-new", "1.1.0", tmp_path / "keys", members)
    (wheel,) = new.root.glob("artifacts/*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    predicate, details = rehearse(str(old.root), str(new.root), candidate_ref=new.candidate_ref,
                                  key=public_key(tmp_path / "keys"), model=MODEL, workdir=tmp_path / "rehearsal",
                                  from_version="1.0.0", to_version="1.1.0")
    assert predicate["verdict"] == "fail"
    assert [s["passed"] for s in predicate["scenarios"]] == [False, False, False]
    assert wheel.name in details["upgrade"]["error"], details
