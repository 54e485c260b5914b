"""Fault suite for stores: a publish killed mid-upload never leaves a partial object where a
verifier or a reader can see it, and a rerun of the publish completes a release that verifies.

LocalStore: the publishing process is SIGKILLed in the middle of copying one object (a real
crash; nothing runs its cleanup). S3Store: the upload's connection is cut mid-body by a proxy
between the store and moto's real S3 server."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from releases.errors import StoreError
from releases.publish import latest_published, publish_release, unfinished_versions
from releases.stores import LocalStore, S3Store
from releases.verify import verify_release
from tests.releases.cutting_proxy import CuttingProxy

ROOT = Path(__file__).resolve().parents[2]

# Runs in a child process: publish, and die by SIGKILL halfway through copying the N-th object.
_CRASH = """
import os, shutil, signal, sys
import releases.stores.local as local
from releases.publish import publish_release
from releases.stores import LocalStore

calls = {"n": 0}
real = shutil.copyfileobj

def copy_then_die(src, dst, *args):
    calls["n"] += 1
    if calls["n"] == int(sys.argv[3]):
        dst.write(src.read(7))
        dst.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args)

local.shutil.copyfileobj = copy_then_die
publish_release(sys.argv[1], LocalStore(sys.argv[2]), "1.2.3")
"""


def _crash_publish(release_root: Path, store_root: Path, nth: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CRASH, str(release_root), str(store_root), str(nth)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def _dot_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob(".*"))


@pytest.mark.parametrize("nth", [1, 6, 18])  # the first object, an artifact, manifest.json (the last)
def test_local_publish_killed_mid_upload_is_repaired_by_a_rerun(published_release, tmp_path, nth):
    store_root = tmp_path / "store"
    crashed = _crash_publish(published_release.root, store_root, nth)
    assert crashed.returncode == -9, crashed.stderr
    version_dir = store_root / "1.2.3"
    store = LocalStore(store_root)
    # Nothing partial is visible: no temp file in the version folder, no object with cut bytes.
    assert _dot_files(version_dir) == []
    assert len(store.list("1.2.3/")) == nth - 1
    for key in store.list("1.2.3/"):
        assert store.read_bytes(key) == (published_release.root / key.removeprefix("1.2.3/")).read_bytes()
    assert latest_published(store) is None
    assert unfinished_versions(store) == (["1.2.3"] if nth > 1 else [])  # the state a rerun repairs
    # The crashed put's temp file sits outside every key, and is what a later put sweeps away.
    assert len(list((store_root / ".incoming").iterdir())) == 1

    result = publish_release(published_release.root, store, "1.2.3")
    assert result.report.ok
    report = verify_release(version_dir, require_ready=True)
    assert report.ok, [str(f) for f in report.failures]
    assert list((store_root / ".incoming").iterdir()) == []
    assert unfinished_versions(store) == [] and latest_published(store) == "1.2.3"


def test_temp_file_left_in_a_version_folder_by_an_older_store_is_swept_by_the_rerun(published_release, tmp_path):
    """What a crash under the previous LocalStore left: `.put-*` next to the objects."""
    store = LocalStore(tmp_path / "store")
    (tmp_path / "store" / "1.2.3").mkdir(parents=True)
    debris = tmp_path / "store" / "1.2.3" / ".put-abc123"
    debris.write_bytes(b"half an obj")
    publish_release(published_release.root, store, "1.2.3")
    assert not debris.exists()
    report = verify_release(tmp_path / "store" / "1.2.3", require_ready=True)
    assert report.ok, [str(f) for f in report.failures]


def test_a_put_in_progress_in_a_live_process_is_not_swept(tmp_path):
    store = LocalStore(tmp_path / "store")
    (tmp_path / "store" / ".incoming").mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        live = tmp_path / "store" / ".incoming" / f"{sleeper.pid}-xyz"
        live.write_bytes(b"being written")
        src = tmp_path / "f"
        src.write_bytes(b"data")
        store.put_file("v/f", src)
        assert live.exists()
        assert store.list() == ["v/f"]
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.fixture
def proxied_s3(s3_store, moto_endpoint):
    """The same bucket seen through a proxy that can cut uploads."""
    proxy = CuttingProxy(moto_endpoint)
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    yield proxy, S3Store(s3_store.bucket, prefix="releases", endpoint_url=proxy.url, region="us-east-1",
                         credentials=creds, timeout_s=10), s3_store
    proxy.close()


def test_s3_upload_cut_mid_body_leaves_no_object(proxied_s3, tmp_path):
    proxy, through_proxy, direct = proxied_s3
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(3 << 20))
    proxy.cut_marker = b"/v/artifacts/big.bin"
    with pytest.raises(StoreError, match="put v/artifacts/big.bin failed"):
        through_proxy.put_file("v/artifacts/big.bin", src)
    assert proxy.cuts >= 1
    assert not direct.exists("v/artifacts/big.bin")
    assert direct.list() == []
    proxy.cut_marker = None
    assert through_proxy.put_file("v/artifacts/big.bin", src) == direct._stored_sha256("v/artifacts/big.bin")


def test_s3_publish_cut_mid_upload_is_repaired_by_a_rerun(proxied_s3, published_release, tmp_path):
    proxy, through_proxy, direct = proxied_s3
    wheel = next(p.name for p in (published_release.root / "artifacts").iterdir() if p.suffix == ".whl")
    proxy.cut_marker = f"/1.2.3/artifacts/{wheel}".encode()
    with pytest.raises(StoreError, match=wheel):
        publish_release(published_release.root, through_proxy, "1.2.3")
    assert proxy.cuts >= 1
    assert not direct.exists(f"1.2.3/artifacts/{wheel}")
    assert not direct.exists("1.2.3/manifest.json") and latest_published(direct) is None
    assert unfinished_versions(direct) == (["1.2.3"] if direct.list("1.2.3/") else [])
    for key in direct.list("1.2.3/"):  # what did land is whole
        assert direct.read_bytes(key) == (published_release.root / key.removeprefix("1.2.3/")).read_bytes()

    result = publish_release(published_release.root, direct, "1.2.3")
    assert result.report.ok and latest_published(direct) == "1.2.3"
    for key in direct.list("1.2.3/"):
        direct.get_file(key, tmp_path / "copy" / key)
    assert verify_release(tmp_path / "copy" / "1.2.3", require_ready=True).ok
