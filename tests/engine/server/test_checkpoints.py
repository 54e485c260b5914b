import json

import pytest
import torch

from engine.server.checkpoints import (CheckpointQuotaExceeded, CheckpointStore, origin_key)

IDENT = {"model_sha256": "a" * 64, "profile_sha256": "b" * 64, "kv_dtype": "float32",
         "engine_version": "0.1.0"}


def _tensors(n=8):
    g = torch.Generator().manual_seed(0)
    return {"k.0": torch.randn(n, 4, generator=g), "v.0": torch.randn(n, 4, generator=g)}


def _gen_dir(store, session):
    sdir = store.session_dir(session)
    return sdir / (sdir / "current").read_text()


def test_roundtrip(tmp_path):
    s = CheckpointStore(tmp_path, IDENT, 1 << 20)
    t = _tensors()
    assert s.inspect("k").status == "missing"
    m = s.save("k", [1, 2, 3], t)
    assert m["token_count"] == 3 and m["origin"] is None
    info, ck = s.load("k")
    assert info.status == "available"
    assert ck.token_ids == [1, 2, 3]
    assert torch.equal(ck.tensors["k.0"], t["k.0"])
    # manifest is the last file written and names only digests, never the session key
    assert "k" not in json.loads((_gen_dir(s, "k") / "manifest.json").read_text()).values()


def test_resave_replaces_generation(tmp_path):
    s = CheckpointStore(tmp_path, IDENT, 1 << 20)
    s.save("k", [1], _tensors())
    s.save("k", [1, 2], _tensors())
    sdir = s.session_dir("k")
    assert len([d for d in sdir.iterdir() if d.is_dir()]) == 1
    assert s.load("k")[1].token_ids == [1, 2]


@pytest.mark.parametrize("name", ["tensors.safetensors", "tokens.json"])
def test_flipped_byte_is_corrupt(tmp_path, name):
    s = CheckpointStore(tmp_path, IDENT, 1 << 20)
    s.save("k", [1, 2, 3], _tensors())
    f = _gen_dir(s, "k") / name
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))
    info, ck = s.load("k")
    assert info.status == "corrupt" and ck is None
    assert name in info.reason


def test_identity_change_is_incompatible(tmp_path):
    CheckpointStore(tmp_path, IDENT, 1 << 20).save("k", [1], _tensors())
    other = CheckpointStore(tmp_path, {**IDENT, "kv_dtype": "int8"}, 1 << 20)
    info = other.inspect("k")
    assert info.status == "incompatible" and "kv_dtype" in info.reason


def test_origin_auth(tmp_path):
    s = CheckpointStore(tmp_path, IDENT, 1 << 20, origin_key("key-one"))
    s.save("k", [1, 2], _tensors())
    assert s.inspect("k").status == "available"
    wrong = CheckpointStore(tmp_path, IDENT, 1 << 20, origin_key("key-two"))
    assert wrong.inspect("k").status == "incompatible"
    # same key, manifest edited: the MAC no longer verifies
    mf = _gen_dir(s, "k") / "manifest.json"
    m = json.loads(mf.read_text())
    m["token_count"] = 1
    mf.write_text(json.dumps(m))
    assert s.inspect("k").status == "corrupt"


def test_quota_evicts_oldest(tmp_path):
    one = CheckpointStore(tmp_path, IDENT, 1 << 30)
    one.save("a", [1], _tensors(64))
    size = one.total_bytes()
    s = CheckpointStore(tmp_path, IDENT, int(size * 2.5))
    s.save("b", [1], _tensors(64))
    s.save("c", [1], _tensors(64))
    assert s.inspect("a").status == "missing"
    assert s.inspect("b").status == "available" and s.inspect("c").status == "available"
    tiny = CheckpointStore(tmp_path / "t", IDENT, 16)
    with pytest.raises(CheckpointQuotaExceeded):
        tiny.save("x", [1], _tensors())
    assert tiny.inspect("x").status == "missing"


def test_delete(tmp_path):
    s = CheckpointStore(tmp_path, IDENT, 1 << 20)
    s.save("k", [1], _tensors())
    assert s.delete("k") is True
    assert s.delete("k") is False
    assert s.inspect("k").status == "missing"


@pytest.mark.parametrize("key", [None, origin_key("key-one")], ids=["plain", "origin-auth"])
def test_current_pointing_at_another_session_is_refused(tmp_path, key):
    s = CheckpointStore(tmp_path, IDENT, 1 << 20, key)
    s.save("victim", [7, 8, 9], _tensors())
    s.save("attacker", [1], _tensors())
    victim = _gen_dir(s, "victim")
    cur = s.session_dir("attacker") / "current"
    cur.write_text(f"../{victim.parent.name}/{victim.name}")
    info, ck = s.load("attacker")
    assert info.status == "corrupt" and ck is None
    assert "generation of this session" in info.reason
    # absolute paths and symlinked generation folders are refused the same way
    cur.write_text(str(victim))
    assert s.inspect("attacker").status == "corrupt"
    link = s.session_dir("attacker") / ("g" + "0" * 20 + "-" + "a" * 8)
    link.symlink_to(victim, target_is_directory=True)
    cur.write_text(link.name)
    assert s.load("attacker")[0].status == "corrupt"
    assert s.load("victim")[1].token_ids == [7, 8, 9]


@pytest.mark.parametrize("key", [None, origin_key("key-one")], ids=["plain", "origin-auth"])
def test_generation_copied_from_another_session_is_refused(tmp_path, key):
    # a whole generation folder moved under another session's folder verifies (even its MAC:
    # the same key made it), but the manifest names the session it was saved from
    import shutil
    s = CheckpointStore(tmp_path, IDENT, 1 << 20, key)
    s.save("victim", [7, 8, 9], _tensors())
    s.save("attacker", [1], _tensors())
    victim = _gen_dir(s, "victim")
    adir = s.session_dir("attacker")
    shutil.rmtree(_gen_dir(s, "attacker"))
    shutil.copytree(victim, adir / victim.name)
    (adir / "current").write_text(victim.name)
    info, ck = s.load("attacker")
    assert info.status == "corrupt" and ck is None
    assert info.reason == "manifest belongs to another session"
