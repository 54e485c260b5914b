"""gates/staged_downloads on a real host (LocalHost) from a release staged in a filesystem store and
served on 127.0.0.1: every listed asset arrives anonymously and matches; a tampered one does not."""
from __future__ import annotations

import pytest

from gates.staged_downloads import download_staged
from hosts.local import LocalHost
from releases import keys
from releases.staging import served, stage_release
from releases.stores.local import LocalStore
from tests.releases.test_stage import VERSION, _stage_ready


@pytest.fixture
def staged(tmp_path):
    key = keys.load_private_key(keys.ensure_local_key(tmp_path / "keys")[0])
    stager = _stage_ready(tmp_path / "ws", key)
    stager.compose()
    store = LocalStore(tmp_path / "store")
    return store, stage_release(stager.root, store, VERSION), (stager.root / "SHA256SUMS").read_bytes()


def test_every_asset_downloads_anonymously_and_matches(tmp_path, staged):
    store, st, sums = staged
    with served(store, st) as url:
        rows = download_staged(LocalHost(), url, str(tmp_path / "dl"), sums)
    assert rows[0]["name"] == "SHA256SUMS" and len(rows) > 1
    assert all(r["matched"] and r["anonymous"] and len(r["sha256"]) == 64 for r in rows)
    assert all((tmp_path / "dl" / r["name"]).is_file() for r in rows)


def test_a_tampered_asset_is_recorded_unmatched(tmp_path, staged):
    store, st, sums = staged
    asset = next(k for k in st.keys if "/artifacts/" in k)
    (store.root / asset).write_bytes(b"tampered")
    with served(store, st) as url:
        rows = {r["name"]: r for r in download_staged(LocalHost(), url, str(tmp_path / "dl"), sums)}
    name = asset[len(st.folder):]
    assert rows[name]["matched"] is False
    assert [n for n, r in rows.items() if not r["matched"]] == [name]
