"""Every schema loads; errors name the kind, the file and the JSON pointer of the bad key."""
from __future__ import annotations

import copy

import pytest

from releases import schema
from releases.errors import SchemaError
from tests.releases.fixtures import T0, T1, candidate_record

REF = {"id": "a" * 64, "commit": "b" * 40, "tree": "c" * 40}
LANE = {"candidate": REF, "lane": "h200", "host": "gpu-lane-1", "artifact": {"name": "x.whl", "sha256": "d" * 64},
        "verdict": "pass", "phases": [{"name": "install", "status": "pass", "started_at": T0, "ended_at": T1, "facts": {}}],
        "window": {"lease": None, "restored": True, "restore_diff": []}}


def test_all_kinds_present_and_valid_schemas():
    kinds = schema.kinds()
    for kind in ("candidate", "build", "reproducibility", "lane", "acceptance", "rehearsal", "manifest", "approval", "ledger",
                 "waiver"):
        assert kind in kinds
        schema._validator(kind)


def test_valid_records_pass():
    assert schema.validate("lane", LANE) is LANE
    schema.validate("candidate", candidate_record())


def _error(kind, record, where="rec.json") -> SchemaError:
    with pytest.raises(SchemaError) as info:
        schema.validate(kind, record, where)
    return info.value


def _with(path, value, base=LANE):
    rec = copy.deepcopy(base)
    node = rec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return rec


@pytest.mark.parametrize("path, value, pointer, fragment", [
    (["window", "restored"], "yes", "/window/restored", "not of type 'boolean'"),
    (["candidate", "id"], "XYZ", "/candidate/id", "does not match"),
    (["verdict"], "maybe", "/verdict", "is not one of"),
    (["phases", 0, "status"], "ok", "/phases/0/status", "is not one of"),
    (["phases", 0, "started_at"], "yesterday", "/phases/0/started_at", ""),
    (["host"], "10.0.0.1", "/host", ""),
])
def test_errors_name_the_key_path(path, value, pointer, fragment):
    err = _error("lane", _with(path, value))
    assert err.kind == "lane" and err.where == "rec.json"
    assert err.path == pointer
    assert fragment in err.message
    assert pointer in str(err) and "rec.json" in str(err)


def test_missing_and_unknown_keys():
    rec = copy.deepcopy(LANE)
    del rec["verdict"]
    assert "'verdict' is a required property" in _error("lane", rec).message
    err = _error("lane", _with(["window", "surprise"], 1))
    assert err.path == "/window" and "surprise" in err.message


def test_pass_requires_restored_window():
    err = _error("lane", _with(["window", "restored"], False))
    assert err.path == "/window/restored"


def test_build_candidate_lives_in_external_parameters():
    record = {"buildDefinition": {"buildType": "https://assay.dev/build/v1",
                                  "externalParameters": {"candidate": dict(REF), "targets": ["wheel"]},
                                  "internalParameters": {"environment": {}, "varied": {}},
                                  "resolvedDependencies": []},
              "runDetails": {"builder": {"id": "b"}, "metadata": {"invocationId": "i", "startedOn": T0, "finishedOn": T1},
                             "byproducts": []}}
    schema.validate("build", record)
    record["buildDefinition"]["externalParameters"]["candidate"]["commit"] = "short"
    assert _error("build", record).path == "/buildDefinition/externalParameters/candidate/commit"


def test_manifest_state_requires_fields():
    draft = {"manifest_schema": "assay/manifest/v1", "state": "draft", "version": "1.0", "candidate": REF}
    schema.validate("manifest", draft)
    err = _error("manifest", dict(draft, state="ready"))
    assert "required" in err.message


def test_unknown_kind():
    with pytest.raises(SchemaError, match="no schema for record kind 'nope'"):
        schema.validate("nope", {})


def test_dirty_candidate_needs_digest():
    rec = dict(candidate_record(), dirty=True)
    assert _error("candidate", rec).path == "/dirty_digest"


def test_read_json_validates_again(tmp_path):
    from releases.release_dir import read_json, write_json

    path = tmp_path / "lane.json"
    write_json(path, LANE, "lane")
    assert read_json(path, "lane") == LANE
    path.write_text(path.read_text().replace('"pass"', '"great"', 1))
    with pytest.raises(SchemaError) as info:
        read_json(path, "lane")
    assert info.value.where == "lane.json"
