"""What a lane host sends back is checked before anything is bound: receipts signed by the writer
the lane runs (gates/phase_receipts.py), then forged one way at a time."""

from __future__ import annotations

import json

import pytest

from flows.lane_staging import check_returned, put_receipts, read_returned, receipts_prefix, wheel_key
from gates.phase_receipts import ReceiptWriter, entry
from gates.phases import PhaseOutcome
from releases.keys import ensure_local_key, load_private_key
from releases.stores import LocalStore

REF = {"id": "c" * 64, "commit": "a" * 40, "tree": "b" * 40}
WHEEL = {"name": "assay_engine-0.1.0-py3-none-any.whl", "sha256": "d" * 64}
CHAIN = ("preflight", "install", "startup-fit", "protocol", "restart", "benchmark", "restore")


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    return load_private_key(ensure_local_key(tmp_path_factory.mktemp("keys"))[0])


def _lane(out, key, *, chain=CHAIN, candidate=REF, wheel=WHEEL, status="pass") -> dict[str, bytes]:
    """A lane's receipts as gates writes them, read back as the files a worker would send."""
    writer = ReceiptWriter(out, key, candidate=candidate, lane="cpu-smoke", kind="cpu-smoke", host="tb0",
                           artifact=wheel, run_id="qualify-test")
    statuses = {p: "pass" for p in chain}
    if status != "pass":   # as gates.qualify runs a chain: after a failed phase the rest are skipped, restore runs
        statuses.update({p: "skipped" for p in chain[chain.index("protocol"):-1]}, protocol=status)
    outcomes = [PhaseOutcome(p, statuses[p], "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", {"seconds": 1.0})
                for p in chain]
    written = [writer.write_phase(o) for o in outcomes if o.status != "skipped"]
    writer.write_lane({"candidate": candidate, "lane": "cpu-smoke", "kind": "cpu-smoke", "host": "tb0",
                       "artifact": wheel, "verdict": "pass" if status == "pass" else "fail",
                       "phases": [o.as_record() for o in outcomes], "phase_receipts": [entry(w) for w in written],
                       "window": {"lease": None, "restored": True, "restore_diff": [], "held_s": 1.0,
                                  "max_hold_s": 600, "audit": {"ok": True, "checks": []}}})
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.dsse.json")}


def _check(files, key, **over):
    args = {"lane": "cpu-smoke", "kind": "cpu-smoke", "chain": CHAIN, "candidate": REF, "wheel": WHEEL,
            "key": key.public_key(), **over}
    return check_returned(files, **args)


def test_a_whole_lane_comes_back_in_order(tmp_path, key):
    got = _check(_lane(tmp_path, key), key)
    assert got.problems == []
    assert [(kind, label) for kind, label, _ in got.receipts] == [("phase", f"cpu-smoke/{p}") for p in CHAIN] + [
        ("lane", "cpu-smoke")]
    assert got.verdict == "pass" and got.record["host"] == "tb0"


def test_a_failed_lane_comes_back_with_its_verdict(tmp_path, key):
    got = _check(_lane(tmp_path, key, status="fail"), key)
    assert got.problems == [] and got.verdict == "fail"
    assert [label for _, label, _ in got.receipts] == ["cpu-smoke/preflight", "cpu-smoke/install",
                                                       "cpu-smoke/startup-fit", "cpu-smoke/protocol",
                                                       "cpu-smoke/restore", "cpu-smoke"]


def test_another_key_is_refused(tmp_path, key):
    stranger = load_private_key(ensure_local_key(tmp_path / "stranger")[0])
    got = _check(_lane(tmp_path / "out", stranger), key)
    assert len(got.problems) == 1 and "receipts/lane/cpu-smoke.dsse.json" in got.problems[0]
    assert "signature" in got.problems[0].lower()


def test_another_wheel_or_candidate_is_refused(tmp_path, key):
    other = _check(_lane(tmp_path / "a", key, wheel={**WHEEL, "sha256": "e" * 64}), key)
    assert any("is not the wheel sent" in p for p in other.problems)
    assert all(WHEEL["sha256"] in p for p in other.problems if "wheel sent" in p)
    moved = _check(_lane(tmp_path / "b", key, candidate={**REF, "id": "f" * 64}), key)
    assert any("names another candidate (id " + "f" * 64 in p for p in moved.problems)


def test_a_missing_phase_is_refused(tmp_path, key):
    files = _lane(tmp_path / "a", key, chain=tuple(p for p in CHAIN if p != "restart"))
    got = _check(files, key)
    assert any("are not the lane's chain" in p for p in got.problems)
    files = _lane(tmp_path / "b", key)
    del files["receipts/phase/cpu-smoke/restart.dsse.json"]
    assert _check(files, key).problems == [
        "phase receipt receipts/phase/cpu-smoke/restart.dsse.json (bound by the lane receipt) did not come back"]
    assert "no lane receipt" in _check({}, key).problems[0]


def test_a_flipped_byte_is_refused(tmp_path, key):
    files = _lane(tmp_path, key)
    path = "receipts/phase/cpu-smoke/protocol.dsse.json"
    envelope = json.loads(files[path])
    envelope["signatures"][0]["sig"] = ("A" if envelope["signatures"][0]["sig"][0] != "A" else "B") + \
        envelope["signatures"][0]["sig"][1:]
    files[path] = json.dumps(envelope).encode()
    got = _check(files, key)
    assert got.problems == [f"{path}: sha256 " + got.problems[0].split("sha256 ")[1]]
    assert "is not the" in got.problems[0] and "the lane receipt binds" in got.problems[0]


def test_an_extra_file_is_refused(tmp_path, key):
    files = _lane(tmp_path, key)
    files["receipts/phase/cpu-smoke/extra.dsse.json"] = b"{}"
    assert _check(files, key).problems == [
        "files that no receipt binds came back: ['receipts/phase/cpu-smoke/extra.dsse.json']"]


def test_receipts_travel_through_the_store_staging_area(tmp_path, key):
    out = tmp_path / "lane"
    files = _lane(out, key)
    store = LocalStore(tmp_path / "store")
    wkey = wheel_key("run-1", "cpu-smoke", WHEEL["name"])
    assert wkey == f"_staging/lanes/run-1/cpu-smoke/wheel/{WHEEL['name']}"
    prefix = receipts_prefix(wkey, "child-2")
    assert prefix == "_staging/lanes/run-1/cpu-smoke/child-2"
    sent = put_receipts(store, prefix, out, sorted(out.rglob("*.dsse.json")))
    assert len(sent) == len(CHAIN) + 1
    assert read_returned(store, prefix) == files
    from releases.publish import published_versions
    assert published_versions(store) == []   # the staging area holds no release
