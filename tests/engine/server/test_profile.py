import json

import pytest

from engine.server.profile import ProfileError, load_profile, validate_profile
from engine.server.identity import model_sha256, tree_sha256


def _write(tmp_path, data):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(data))
    return p


def test_defaults_and_relative_paths(tmp_path):
    p = _write(tmp_path, {"model": {"path": "m"}, "request_log": "logs/r.jsonl",
                          "checkpoints": {"directory": "ck"}})
    prof = load_profile(p)
    assert prof["model"]["path"] == str(tmp_path / "m")
    assert prof["request_log"] == str(tmp_path / "logs" / "r.jsonl")
    assert prof["checkpoints"]["directory"] == str(tmp_path / "ck")
    assert prof["checkpoints"]["quota_mib"] == 1024
    assert prof["kv_capacity"] == "auto"


def test_overrides_win(tmp_path):
    p = _write(tmp_path, {"model": {"path": "m"}, "listen": {"port": 1234}})
    prof = load_profile(p, host="127.0.0.2", port=4321, model=str(tmp_path / "other"))
    assert prof["listen"] == {"host": "127.0.0.2", "port": 4321}
    assert prof["model"]["path"] == str(tmp_path / "other")


def test_unknown_key_named(tmp_path):
    p = _write(tmp_path, {"model": {"path": "m"}, "speculative": {"backend": "none", "bogus": 1}})
    with pytest.raises(ProfileError) as e:
        load_profile(p)
    assert e.value.where == "/speculative"
    assert "bogus" in e.value.message


def test_bad_value_path(tmp_path):
    p = _write(tmp_path, {"model": {"path": "m"}, "kv_capacity": "lots"})
    with pytest.raises(ProfileError) as e:
        load_profile(p)
    assert e.value.where == "/kv_capacity"


def test_origin_auth_needs_key(tmp_path):
    p = _write(tmp_path, {"model": {"path": "m"}, "checkpoints": {"require_origin_auth": True}})
    with pytest.raises(ProfileError, match="api_key_file"):
        load_profile(p)


def test_not_json_and_missing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="not found"):
        load_profile(tmp_path / "nope.json")


def test_identity_ignores_deployment_keys(tmp_path):
    p = _write(tmp_path, {"model": {"path": "m"}})
    a = load_profile(p, port=1)
    b = load_profile(p, port=2, model=str(tmp_path / "x"))
    assert a.identity_sha256() == b.identity_sha256()
    p2 = _write(tmp_path, {"model": {"path": "m"}, "max_context": 4096})
    assert load_profile(p2).identity_sha256() != a.identity_sha256()


def test_shipped_tiny_profile_is_valid():
    from pathlib import Path
    import engine
    tiny = Path(engine.__file__).parent / "profiles" / "tiny-cpu.json"
    validate_profile(json.loads(tiny.read_text()), str(tiny))


def test_model_sha_covers_names_and_bytes(tmp_path):
    (tmp_path / "a").write_bytes(b"1")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"2")
    first = model_sha256(tmp_path)
    assert first == tree_sha256(tmp_path)
    (tmp_path / "sub" / "b").write_bytes(b"3")
    second = model_sha256(tmp_path)
    assert second != first
    (tmp_path / "sub" / "b").rename(tmp_path / "sub" / "c")
    assert model_sha256(tmp_path) not in (first, second)


def test_model_path_from_flag_only(tmp_path):
    p = _write(tmp_path, {"model": {"name": "reference"}})
    with pytest.raises(ProfileError) as e:
        load_profile(p)
    assert e.value.where == "/model/path" and "--model" in e.value.message
    prof = load_profile(p, model=str(tmp_path / "m"))
    assert prof["model"]["path"] == str(tmp_path / "m") and prof["model"]["name"] == "reference"


def test_an_api_key_file_others_can_read_is_refused(tmp_path):
    from engine.server.auth import KeyFileError, read_keys

    keys = tmp_path / "keys"
    keys.write_text("k1\n")
    keys.chmod(0o640)
    with pytest.raises(KeyFileError, match="readable by group or others .mode 640"):
        read_keys(keys)
    keys.chmod(0o600)
    assert read_keys(keys) == ["k1"]
