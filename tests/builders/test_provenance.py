"""The provenance's source URI is the repository's public remote (or a configured URI), never a
directory name, and never carries credentials."""
from __future__ import annotations

import subprocess

import pytest

from builders.provenance import build_record, public_remote, repository_uri, source_dependencies
from releases.schema import validate

COMMIT, TREE = "1" * 40, "2" * 40
CANDIDATE = {"source": {"name": "my-checkout-dir", "subdir": "engine", "ref": "HEAD"}, "commit": COMMIT, "tree": TREE,
             "dirty": False, "dirty_digest": None}


@pytest.mark.parametrize("remote, public", [
    ("https://github.com/example/engine.git", "https://github.com/example/engine.git"),
    ("https://someone:ghp_SECRETTOKEN1234567890@github.com/example/engine.git", "https://github.com/example/engine.git"),
    ("https://oauth2@gitlab.example.org:8443/group/engine", "https://gitlab.example.org:8443/group/engine"),
    ("git@github.com:example/engine.git", "ssh://git@github.com/example/engine.git"),
    ("ssh://git@github.com/example/engine.git", "ssh://git@github.com/example/engine.git"),
    ("/srv/checkouts/engine", None),
    ("file:///srv/checkouts/engine", None),
    ("../engine", None),
])
def test_public_remote(remote, public):
    assert public_remote(remote) == public


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_repository_uri_reads_origin_and_prefers_configuration(tmp_path):
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    assert repository_uri(repo) is None  # no origin: nothing public to name
    _git(repo, "remote", "add", "origin", "https://ci:token123@git.example.org/team/engine.git")
    assert repository_uri(repo) == "https://git.example.org/team/engine.git"
    assert repository_uri(repo, "https://mirror.example.org/engine") == "https://mirror.example.org/engine"
    assert repository_uri(tmp_path / "not-a-repo") is None


def test_source_dependencies_name_the_remote_or_say_there_is_none():
    (dep,) = source_dependencies(CANDIDATE, "https://github.com/example/engine.git")
    assert dep["uri"] == f"git+https://github.com/example/engine.git@{COMMIT}#subdirectory=engine"
    (dep,) = source_dependencies(CANDIDATE, None)
    assert dep["uri"] == f"urn:assay:unpublished-source:{TREE}@{COMMIT}#subdirectory=engine"
    assert "my-checkout-dir" not in dep["uri"]
    dirty = dict(CANDIDATE, dirty=True, dirty_digest="3" * 64)
    assert [d["name"] for d in source_dependencies(dirty, None)] == ["my-checkout-dir", "uncommitted-changes"]


def test_build_record_carries_the_uri_and_validates():
    ref = {"id": "a" * 64, "commit": COMMIT, "tree": TREE}
    record = build_record(candidate=CANDIDATE, ref=ref, label="a", host_name="local", environment={}, varied={},
                          started=0, finished=1, byproducts=[], source_uri="https://github.com/example/engine.git")
    validate("build", record)
    assert record["buildDefinition"]["resolvedDependencies"][0]["uri"].startswith("git+https://github.com/example/")
