"""Build a on this machine and build b over SSH in a test-bed container, then compare.

The container has Debian's python3 but no build tools and no index to install them from, so
the test carries the pure-Python toolchain (pypa/build, hatchling and their dependencies, at
this venv's pinned versions) over and points build b at a small interpreter wrapper.
"""
from importlib import metadata
from pathlib import Path

import pytest

from builders.compare import compare
from builders.recipe import build_twice
from builders.snapshot import export_source, freeze
from hosts.inventory import load_inventory
from hosts.local import LocalHost
from tests.builders.conftest import fixture_files, make_repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOOL_DISTS = ("build", "pyproject_hooks", "packaging", "hatchling", "pathspec", "pluggy", "trove_classifiers")
REMOTE_TOOLS = "/root/assay-build-tools"


def stage_toolchain(dest: Path) -> Path:
    site = dest / "site"
    for name in TOOL_DISTS:
        dist = metadata.distribution(name)
        for rel in dist.files or []:
            if ".." in rel.parts or rel.suffix == ".pyc":
                continue  # console scripts live outside site-packages; bytecode is rebuilt
            src = Path(dist.locate_file(rel))
            if src.is_file():
                target = site / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(src.read_bytes())
    wrapper = dest / "python"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={REMOTE_TOOLS}/site exec /usr/bin/python3 \"$@\"\n")
    return dest


@pytest.fixture
def remote(testbed):
    host = load_inventory(testbed).connect("tb1")
    yield host
    host.remove(REMOTE_TOOLS)
    host.close()


def test_a_local_and_a_remote_build_agree(remote, tmp_path):
    tools = stage_toolchain(tmp_path / "tools")
    remote.put(tools, REMOTE_TOOLS)
    remote.run(["chmod", "755", f"{REMOTE_TOOLS}/python"], timeout=30).check()

    repo = make_repo(tmp_path / "repo", fixture_files())
    candidate = freeze(repo, subdir="pkg")
    source = export_source(repo, candidate, tmp_path / "export")
    workroot = f"/tmp/assay-remote-{tmp_path.name}"
    try:
        a, b = build_twice(LocalHost(), remote, candidate, source, workroot,
                           local_dir=tmp_path / "fetched", python_b=f"{REMOTE_TOOLS}/python",
                           timeout=300)
    finally:
        remote.remove(workroot)
        LocalHost().remove(workroot)
    assert b.record["buildDefinition"]["internalParameters"]["varied"]["host"] == "tb1"
    remote_python = remote.run(["/usr/bin/python3", "-c", "import platform; print(platform.python_version())"],
                               timeout=30).check().stdout.strip()
    assert b.record["buildDefinition"]["internalParameters"]["environment"]["toolchain"]["python"] == remote_python
    assert [p.name for p in b.artifacts] == [p.name for p in a.artifacts]
    rec = compare(tmp_path / "fetched" / "a", tmp_path / "fetched" / "b", candidate)
    assert rec["verdict"] == "reproducible", rec["files"]
