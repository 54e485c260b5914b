"""publish_release to LocalStore and S3Store (moto server): order, write-once, resume, re-verify."""
from __future__ import annotations

import pytest

from releases.errors import PublishRefused, VerificationFailed
from releases.publish import latest_published, publish_release, published_versions
from releases.stores import LocalStore
from releases.verify import verify_release
from tests.releases.fixtures import build_release


class Interrupted(RuntimeError):
    pass


class FailAfter:
    """Wraps a real store and dies after `n` successful uploads, as a crash mid-publish would."""

    def __init__(self, inner, n: int) -> None:
        self.inner, self.left = inner, n

    def put_file(self, key, path):
        if self.left == 0:
            raise Interrupted(f"injected failure before {key}")
        self.left -= 1
        return self.inner.put_file(key, path)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    return request.getfixturevalue("s3_store")


def test_publish_full_release_and_reverify(store, published_release, tmp_path):
    seen = []
    result = publish_release(published_release.root, store, "1.2.3", progress=lambda k, d, t: seen.append((k, d, t)))
    assert seen[-1] == ("1.2.3/manifest.json", result.uploaded, result.uploaded)
    assert seen[-2][0] == "1.2.3/manifest.sig"
    local = sorted(p.relative_to(published_release.root).as_posix()
                   for p in published_release.root.rglob("*") if p.is_file())
    assert result.keys == [f"1.2.3/{rel}" for rel in local]
    assert result.report.ok and result.report.state == "published"
    for key in result.keys:
        store.get_file(key, tmp_path / "copy" / key)
    assert verify_release(tmp_path / "copy" / "1.2.3", require_ready=True).ok
    assert latest_published(store) == "1.2.3"


def test_second_publish_of_same_version_is_refused(store, published_release):
    publish_release(published_release.root, store, "1.2.3")
    with pytest.raises(PublishRefused, match="already published") as info:
        publish_release(published_release.root, store, "1.2.3")
    assert info.value.key == "1.2.3/manifest.json"


@pytest.mark.parametrize("after", [0, 5, 17])  # 17: all but manifest.json (18 files)
def test_interrupted_publish_leaves_no_manifest_and_rerun_completes(store, published_release, after):
    with pytest.raises(Interrupted):
        publish_release(published_release.root, FailAfter(store, after), "1.2.3")
    assert not store.exists("1.2.3/manifest.json")
    assert latest_published(store) is None
    assert len(store.list("1.2.3/")) == after
    result = publish_release(published_release.root, store, "1.2.3")
    assert result.report.ok
    assert store.exists("1.2.3/manifest.json")


def test_unapproved_release_is_refused(store, ready_release):
    with pytest.raises(PublishRefused, match="state is ready"):
        publish_release(ready_release.root, store, "1.2.3")
    assert store.list() == []


def test_damaged_release_is_refused_before_upload(store, published_release):
    (published_release.root / "stray.txt").write_text("x")
    with pytest.raises(VerificationFailed) as info:
        publish_release(published_release.root, store, "1.2.3")
    assert [f.file for f in info.value.failures] == ["stray.txt"]
    assert store.list() == []


def test_wrong_version_is_refused(store, published_release):
    with pytest.raises(PublishRefused, match="version 1.2.3, not 9.9.9"):
        publish_release(published_release.root, store, "9.9.9")


def test_changed_asset_after_partial_publish_is_refused(tmp_path):
    store = LocalStore(tmp_path / "store")
    first = build_release(tmp_path / "a" / "1.2.3", key_dir=tmp_path / "key")
    with pytest.raises(Interrupted):
        publish_release(first.root, FailAfter(store, 5), "1.2.3")
    assert store.exists("1.2.3/candidate.json")
    # Same version rebuilt from another commit: candidate.json differs, so write-once must refuse.
    from tests.releases.fixtures import candidate_record
    other = build_release(tmp_path / "b" / "1.2.3", key_dir=tmp_path / "key",
                          candidate=candidate_record("1.2.3", commit="4" * 40))
    with pytest.raises(PublishRefused, match="different bytes"):
        publish_release(other.root, store, "1.2.3")
    assert not store.exists("1.2.3/manifest.json")


def test_latest_published_orders_versions(tmp_path):
    store = LocalStore(tmp_path / "store")
    for version in ("1.10.0", "1.9.0", "1.2.3"):
        rel = build_release(tmp_path / version, version=version, key_dir=tmp_path / "key")
        publish_release(rel.root, store, version)
    # An unfinished attempt (no manifest.json) is invisible.
    src = tmp_path / "blob"
    src.write_bytes(b"x")
    store.put_file("2.0.0/artifacts/blob", src)
    assert published_versions(store) == ["1.2.3", "1.9.0", "1.10.0"]
    assert latest_published(store) == "1.10.0"
