"""`assay publish --resume`: a store folder that a crash left with assets and no manifest is named by
`assay verify` as an unfinished publish, and `assay publish --resume` completes it write-once from
the approved release the run staged; with a filesystem store and with S3 (moto's real S3 server on
127.0.0.1). The crash is a store that stops after N uploads (tests/releases/test_publish.py's
FailAfter); killing a process mid-put is tests/releases/test_store_faults.py's concern."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from releases.publish import publish_release, store_state
from releases.stores import LocalStore
from tests.releases.conftest import moto_endpoint, s3_store  # noqa: F401
from tests.releases.fixtures import build_release
from tests.releases.test_publish import FailAfter, Interrupted

pytestmark = pytest.mark.slow  # each test runs the `assay` command line several times
ASSAY = str(Path(sys.executable).with_name("assay"))
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _config(tmp: Path, store_table: str) -> Path:
    config = tmp / "assay.toml"
    config.write_text(f"""
[release]
name = "resume"
source = "{tmp}"
subdir = "engine"
approvers = ["local-operator"]

[paths]
state = "{tmp / 'state'}"

{store_table}

[build]
hosts = ["local", "local"]

[[lanes]]
name = "cpu-smoke"
kind = "cpu-smoke"
host = "local"
""")
    return config


@pytest.fixture(params=["filesystem", "s3"])
def setup(request, tmp_path):
    """(config, store, the staged approved release) for a store of each kind."""
    if request.param == "filesystem":
        store = LocalStore(tmp_path / "store")
        table = f'[store]\nkind = "filesystem"\npath = "{tmp_path / "store"}"'
    else:
        store = request.getfixturevalue("s3_store")
        endpoint = store.client.meta.endpoint_url
        table = (f'[store]\nkind = "s3"\nbucket = "{store.bucket}"\nprefix = "releases"\n'
                 f'endpoint_url = "{endpoint}"\nregion = "us-east-1"')
    staged = build_release(tmp_path / "state" / "work" / "run-crashed" / "release", version="1.2.3",
                           key_dir=tmp_path / "state" / "keys")
    return _config(tmp_path, table), store, staged


def _assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ASSAY, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **S3_ENV})


def _folder(store, tmp: Path) -> Path:
    """The store's 1.2.3/ as a directory (an S3 store's downloaded first)."""
    if isinstance(store, LocalStore):
        return store.root / "1.2.3"
    for key in store.list("1.2.3/"):
        store.get_file(key, tmp / "copy" / key)
    return tmp / "copy" / "1.2.3"


def test_verify_names_an_unfinished_publish_and_resume_completes_it(setup, tmp_path):
    config, store, staged = setup
    with pytest.raises(Interrupted):
        publish_release(staged.root, FailAfter(store, 6), "1.2.3")
    assert store_state(store, "1.2.3") == "unfinished"

    verify = _assay("verify", "--json", str(_folder(store, tmp_path)))
    assert verify.returncode == 1
    report = json.loads(verify.stdout)
    assert report["state"] == "unfinished" and report["ok"] is False
    (failure,) = report["failures"]
    assert "UNFINISHED PUBLISH" in failure["message"] and "assay publish --resume" in failure["message"]

    # A plain publish of the same release does not complete it unasked; --resume does.
    plain = _assay("publish", str(staged.root), "--config", str(config))
    assert plain.returncode == 1 and "assay publish --resume" in plain.stderr, plain.stdout + plain.stderr
    assert store_state(store, "1.2.3") == "unfinished"
    resumed = _assay("publish", "--resume", "--config", str(config))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "published 1.2.3 (resumed)" in resumed.stdout
    assert "6 object(s) of the unfinished publish were already there and identical; kept" in resumed.stdout
    assert store_state(store, "1.2.3") == "published"
    assert store.read_bytes("1.2.3/manifest.json") == (staged.root / "manifest.json").read_bytes()

    folder = _folder(store, tmp_path / "after")
    key = tmp_path / "state" / "keys" / "release.pub.pem"
    verify = _assay("verify", "--require-ready", "--key", str(key), "--json", str(folder))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["state"] == "published"
    # Write-once: a second resume has nothing to do, and says so.
    again = _assay("publish", "--resume", "--config", str(config))
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stdout + again.stderr


def test_resume_refuses_an_object_the_release_does_not_hold(setup, tmp_path):
    config, store, staged = setup
    with pytest.raises(Interrupted):
        publish_release(staged.root, FailAfter(store, 3), "1.2.3")
    stranger = tmp_path / "stranger.whl"
    stranger.write_bytes(b"not this release's")
    store.put_file("1.2.3/artifacts/stranger.whl", stranger)
    resumed = _assay("publish", "--resume", "--config", str(config))
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert "1.2.3/artifacts/stranger.whl" in resumed.stderr and "not this one's to complete" in resumed.stderr
    assert store_state(store, "1.2.3") == "unfinished"  # nothing committed
    assert len(store.list("1.2.3/")) == 4


def test_resume_without_a_staged_release_names_the_version(setup, tmp_path):
    config, store, staged = setup
    with pytest.raises(Interrupted):
        publish_release(staged.root, FailAfter(store, 2), "1.2.3")
    (staged.root / "manifest.json").unlink()  # the run's workspace is gone
    resumed = _assay("publish", "--resume", "--config", str(config))
    assert resumed.returncode == 1
    assert "no approved release staged" in resumed.stderr and "1.2.3" in resumed.stderr
