"""Staging: a composed release copied under staging/ in a filesystem store and served anonymously on
127.0.0.1; every SHA256SUMS entry downloads with no credentials and matches, the downloaded copy
verifies, the server is gone after, and staging/ is no version."""
from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request

import pytest

from releases import keys
from releases.install.errors import InstallError
from releases.install.fetch import fetch_release, verify_fetched
from releases.publish import published_versions, unfinished_versions
from releases.staging import stage_release, served
from releases.stores.local import LocalStore
from releases.sums import parse_sums
from releases.verify import verify_release
from tests.releases.test_stage import VERSION, _stage_ready


@pytest.fixture
def key(tmp_path):
    path, _ = keys.ensure_local_key(tmp_path / "keys")
    return keys.load_private_key(path)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:  # no Authorization header: anonymous
        return r.read()


def test_staged_release_downloads_anonymously_and_verifies(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    stager.compose()
    store = LocalStore(tmp_path / "store")
    staged = stage_release(stager.root, store, VERSION)
    assert staged.keys[-1] == staged.folder + "manifest.json"
    assert staged.folder.startswith(f"staging/{VERSION}-")
    copy = tmp_path / "copy"
    with served(store, staged) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        sums = parse_sums(_get(url + "SHA256SUMS"))
        assert sums, "SHA256SUMS lists the assets"
        for rel in [k[len(staged.folder):] for k in staged.keys]:
            data = _get(url + rel)
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            (copy / rel).write_bytes(data)
            if rel in sums:
                assert hashlib.sha256(data).hexdigest() == sums[rel]
        with pytest.raises(urllib.error.HTTPError) as listing:
            _get(url)
        assert listing.value.code == 404
    assert verify_release(copy, require_ready=True).ok
    with pytest.raises(urllib.error.URLError):
        _get(url + "SHA256SUMS")  # stopped after
    assert published_versions(store) == [] and unfinished_versions(store) == []


def test_restaging_the_same_compose_is_accepted_and_a_new_compose_gets_its_own_folder(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    stager.compose()
    store = LocalStore(tmp_path / "store")
    first = stage_release(stager.root, store, VERSION)
    assert stage_release(stager.root, store, VERSION) == first
    stager.compose(acceptance_lanes=["cpu-reference"])
    second = stage_release(stager.root, store, VERSION)
    assert second.folder != first.folder


def test_an_uncomposed_release_is_refused(tmp_path, key):
    stager = _stage_ready(tmp_path / "ws", key)
    from releases.errors import StoreError
    with pytest.raises(StoreError, match="compose the release before staging"):
        stage_release(stager.root, LocalStore(tmp_path / "store"), VERSION)


def test_the_installer_fetches_and_verifies_the_staged_release_over_http(tmp_path, key):
    """What the acceptance window's install does first: the installer's own download of the served
    URL, then verification against the pinned public key."""
    stager = _stage_ready(tmp_path / "ws", key)
    stager.compose()
    store = LocalStore(tmp_path / "store")
    staged = stage_release(stager.root, store, VERSION)
    pem = tmp_path / "release.pub.pem"
    pem.write_bytes((stager.root / "keys" / "release.pub.pem").read_bytes())
    with served(store, staged) as url:
        manifest = fetch_release(url, tmp_path / "fetched")
    assert manifest["version"] == VERSION
    assert verify_fetched(tmp_path / "fetched", pem)["version"] == VERSION
    # the same download of a tampered staged asset is refused before anything is installed
    asset = next(k for k in staged.keys if "/artifacts/" in k)
    (store.root / asset).write_bytes(b"tampered")
    with served(store, staged) as url:
        fetch_release(url, tmp_path / "fetched-again")
    with pytest.raises(InstallError):
        verify_fetched(tmp_path / "fetched-again", pem)


def test_an_s3_staging_folder_is_readable_anonymously_while_served(tmp_path, key, s3_store):
    """moto's server as S3; the download is unsigned (botocore UNSIGNED), and the bucket policy the
    staging folder needed is gone after."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    stager = _stage_ready(tmp_path / "ws", key)
    stager.compose()
    staged = stage_release(stager.root, s3_store, VERSION)
    client = s3_store.client
    with pytest.raises(client.exceptions.ClientError):
        client.get_bucket_policy(Bucket=s3_store.bucket)
    with served(s3_store, staged) as url:
        assert url.endswith(f"/{s3_store.bucket}/releases/{staged.folder}")
        policy = json.loads(client.get_bucket_policy(Bucket=s3_store.bucket)["Policy"])
        (st,) = policy["Statement"]
        assert st["Principal"] == "*" and st["Action"] == "s3:GetObject"
        assert st["Resource"] == f"arn:aws:s3:::{s3_store.bucket}/releases/{staged.folder}*"
        anon = boto3.client("s3", endpoint_url=client.meta.endpoint_url, region_name="us-east-1",
                            config=Config(signature_version=UNSIGNED))
        sums = parse_sums(anon.get_object(Bucket=s3_store.bucket, Key=f"releases/{staged.folder}SHA256SUMS")["Body"].read())
        for rel, sha in sums.items():
            body = anon.get_object(Bucket=s3_store.bucket, Key=f"releases/{staged.folder}{rel}")["Body"].read()
            assert hashlib.sha256(body).hexdigest() == sha
        assert parse_sums(_get(url + "SHA256SUMS")) == sums   # the plain URL the installer takes
    with pytest.raises(client.exceptions.ClientError):
        client.get_bucket_policy(Bucket=s3_store.bucket)   # restored: no policy, as before
