"""LocalStore and S3Store (against moto's real S3 server on loopback): write-once semantics."""
from __future__ import annotations

import hashlib
import os
import stat

import pytest

from releases.errors import PublishRefused, StoreError
from releases.stores import LocalStore, Store


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    return request.getfixturevalue("s3_store")


def test_store_round_trip_and_listing(store, tmp_path):
    assert isinstance(store, Store)
    src = tmp_path / "a.bin"
    src.write_bytes(b"alpha\x00")
    assert not store.exists("1.0/artifacts/a.bin")
    sha = store.put_file("1.0/artifacts/a.bin", src)
    assert sha == hashlib.sha256(b"alpha\x00").hexdigest()
    store.put_file("1.0/manifest.json", src)
    store.put_file("2.0/manifest.json", src)
    assert store.exists("1.0/artifacts/a.bin")
    assert store.read_bytes("1.0/artifacts/a.bin") == b"alpha\x00"
    assert store.list("1.0/") == ["1.0/artifacts/a.bin", "1.0/manifest.json"]
    assert store.list() == ["1.0/artifacts/a.bin", "1.0/manifest.json", "2.0/manifest.json"]
    store.get_file("1.0/artifacts/a.bin", tmp_path / "back" / "a.bin")
    assert (tmp_path / "back" / "a.bin").read_bytes() == b"alpha\x00"


def test_write_once_refuses_different_bytes_and_accepts_identical(store, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"first")
    b.write_bytes(b"second")
    store.put_file("v/x", a)
    store.put_file("v/x", a)  # identical rerun is fine
    with pytest.raises(PublishRefused) as info:
        store.put_file("v/x", b)
    assert info.value.key == "v/x" and "v/x" in str(info.value)
    assert store.read_bytes("v/x") == b"first"


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", ".hidden", "a/.tmp"])
def test_bad_keys_are_refused(store, tmp_path, key):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    with pytest.raises(StoreError, match="invalid store key"):
        store.put_file(key, src)


def test_missing_object_is_a_store_error(store, tmp_path):
    with pytest.raises(StoreError, match="no object v/none"):
        store.read_bytes("v/none")
    with pytest.raises(StoreError, match="no object v/none"):
        store.get_file("v/none", tmp_path / "out")


def test_local_store_objects_are_read_only_and_no_temp_left(tmp_path):
    store = LocalStore(tmp_path / "s")
    src = tmp_path / "f"
    src.write_bytes(b"data")
    store.put_file("v/f", src)
    mode = stat.S_IMODE(os.stat(tmp_path / "s" / "v" / "f").st_mode)
    assert mode & 0o222 == 0
    assert sorted(os.listdir(tmp_path / "s" / "v")) == ["f"]


def test_s3_store_uses_its_prefix(s3_store, tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"data")
    s3_store.put_file("v/f", src)
    raw = s3_store.client.list_objects_v2(Bucket=s3_store.bucket)["Contents"]
    assert [o["Key"] for o in raw] == ["releases/v/f"]


def test_s3_head_then_put_fallback(s3_store, tmp_path):
    # moto honours If-None-Match, so the fallback for servers that do not is forced here.
    s3_store.conditional_put = False
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    s3_store.put_file("v/k", a)
    s3_store.put_file("v/k", a)
    with pytest.raises(PublishRefused, match="v/k"):
        s3_store.put_file("v/k", b)
    assert s3_store.read_bytes("v/k") == b"one"


def test_concurrent_writers_one_wins(store, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    sources = []
    for i in range(4):
        src = tmp_path / f"src{i}"
        src.write_bytes(f"writer {i}".encode())
        sources.append(src)

    def attempt(src):
        try:
            store.put_file("race/obj", src)
            return src.read_bytes()
        except PublishRefused:
            return None

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(attempt, sources))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert store.read_bytes("race/obj") == winners[0]
