import hashlib
import os
import stat
import subprocess

import pytest

from builders.errors import DirtySource, SnapshotError
from builders.snapshot import as_ref, export_source, freeze
from releases.canonical import digest
from tests.builders.conftest import COMMIT_EPOCH, fixture_files, git, make_repo, write_files


def test_freeze_records_what_git_says(fixture_repo):
    c = freeze(fixture_repo, subdir="pkg")
    assert c["commit"] == git(fixture_repo, "rev-parse", "HEAD")
    assert c["tree"] == git(fixture_repo, "rev-parse", "HEAD:pkg")
    assert c["source_date_epoch"] == int(git(fixture_repo, "log", "-1", "--format=%ct")) == COMMIT_EPOCH
    assert c["package"] == {"name": "fixture-pkg", "version": "1.2.3"}
    assert c["release_version"] == "1.2.3"
    assert c["source"] == {"name": "fixture-src", "subdir": "pkg", "ref": "HEAD"}
    assert c["dirty"] is False and c["dirty_digest"] is None
    assert as_ref(c) == {"id": digest(c), "commit": c["commit"], "tree": c["tree"]}


def test_freeze_an_older_ref_ignores_the_working_tree(fixture_repo):
    first = git(fixture_repo, "rev-parse", "HEAD")
    git(fixture_repo, "tag", "v1.2.3")
    write_files(fixture_repo, fixture_files(version="1.3.0"))
    git(fixture_repo, "commit", "-qam", "bump")
    (fixture_repo / "pkg" / "scratch.py").write_text("x = 1\n")  # dirty, but not REF's tree
    c = freeze(fixture_repo, ref="v1.2.3", subdir="pkg")
    assert c["commit"] == first
    assert c["package"]["version"] == "1.2.3" and c["dirty"] is False
    assert c["source"]["ref"] == "v1.2.3"


def test_dirty_source_is_refused_naming_the_files(fixture_repo):
    (fixture_repo / "pkg" / "fixturepkg" / "data.py").write_text("TABLE = []\n")
    (fixture_repo / "pkg" / "new_module.py").write_text("y = 2\n")
    (fixture_repo / "pkg" / "fixturepkg" / "cached.pyc").write_bytes(b"ignored")
    (fixture_repo / "outside.txt").write_text("changed outside the subdir\n")
    (fixture_repo / "pkg" / "README.md").unlink()
    with pytest.raises(DirtySource) as err:
        freeze(fixture_repo, subdir="pkg")
    assert err.value.files == ["pkg/README.md", "pkg/fixturepkg/data.py", "pkg/new_module.py"]
    assert "pkg/fixturepkg/data.py" in str(err.value) and "allow_dirty" in str(err.value)


def test_allow_dirty_records_a_digest_of_the_built_files(fixture_repo, tmp_path):
    (fixture_repo / "pkg" / "new_module.py").write_text("y = 2\n")
    c = freeze(fixture_repo, subdir="pkg", allow_dirty=True)
    files = ["README.md", "fixturepkg/__init__.py", "fixturepkg/data.py", "new_module.py", "pyproject.toml"]
    lines = sorted(f"{hashlib.sha256((fixture_repo / 'pkg' / f).read_bytes()).hexdigest()}  {f}\n"
                   for f in files)
    assert c["dirty"] is True
    assert c["dirty_digest"] == hashlib.sha256("".join(lines).encode()).hexdigest()
    assert c["release_version"] == f"1.2.3+g{c['commit'][:12]}.dirty.{c['dirty_digest'][:12]}"
    out = export_source(fixture_repo, c, tmp_path / "exp")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == files
    (fixture_repo / "pkg" / "new_module.py").write_text("y = 3\n")
    with pytest.raises(SnapshotError, match="changed since freeze"):
        export_source(fixture_repo, c, tmp_path / "exp2")


def test_export_writes_the_exact_tree(tmp_path):
    files = fixture_files()
    files["pkg/tools/run.sh"] = "#!/bin/sh\necho $Format:%H$\n"
    files["pkg/.gitattributes"] = "tools/run.sh export-subst\n"
    repo = make_repo(tmp_path / "repo", files)
    os.chmod(repo / "pkg/tools/run.sh", 0o755)
    git(repo, "commit", "-qam", "exec bit")
    c = freeze(repo, subdir="pkg")
    out = export_source(repo, c, tmp_path / "exp")
    listed = git(repo, "ls-tree", "-r", "--name-only", "HEAD:pkg").splitlines()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(listed)
    for rel in listed:
        blob = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"HEAD:pkg/{rel}"],
                              capture_output=True, timeout=30, check=True).stdout
        assert (out / rel).read_bytes() == blob
        assert os.stat(out / rel).st_mtime == COMMIT_EPOCH
    assert "$Format:%H$" in (out / "tools/run.sh").read_text()  # no export-subst rewriting
    assert stat.S_IMODE(os.stat(out / "tools/run.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(out / "pyproject.toml").st_mode) == 0o644


def test_bad_sources_raise_typed_errors(tmp_path):
    files = fixture_files()
    files["pkg/pyproject.toml"] = files["pkg/pyproject.toml"].replace(
        'version = "1.2.3"', 'dynamic = ["version"]')
    repo = make_repo(tmp_path / "repo", files)
    with pytest.raises(SnapshotError, match=r"pkg/pyproject.toml.*static"):
        freeze(repo, subdir="pkg")
    with pytest.raises(SnapshotError, match="nope"):
        freeze(repo, subdir="nope")
    with pytest.raises(SnapshotError, match="ref 'no-such-ref' names no commit"):
        freeze(repo, ref="no-such-ref", subdir="pkg")
    other = make_repo(tmp_path / "other", fixture_files(version="9.9.9"))
    with pytest.raises(SnapshotError, match="does not exist|is not 'pkg'"):
        export_source(other, {**freeze(other, subdir="pkg"), "tree": "0" * 40}, tmp_path / "x")
    with pytest.raises(SnapshotError, match="relative path"):
        freeze(repo, subdir="../elsewhere")


def test_tree_id_of_an_export_equals_git_tree(tmp_path):
    from builders.treehash import files_digest, git_tree_id

    files = fixture_files()
    files["pkg/tools/run.sh"] = "#!/bin/sh\n"
    files["pkg/a-b/x.txt"] = "dir sorting: 'a-b' vs 'a.b' vs 'a'\n"
    files["pkg/a.b"] = "file\n"
    repo = make_repo(tmp_path / "repo", files)
    os.chmod(repo / "pkg/tools/run.sh", 0o755)
    git(repo, "commit", "-qam", "exec")
    c = freeze(repo, subdir="pkg")
    out = export_source(repo, c, tmp_path / "exp")
    assert git_tree_id(out) == c["tree"]
    (out / "a.b").write_text("changed\n")
    assert git_tree_id(out) != c["tree"]
    (repo / "pkg" / "extra.txt").write_text("dirty\n")
    d = freeze(repo, subdir="pkg", allow_dirty=True)
    assert files_digest(export_source(repo, d, tmp_path / "exp2")) == d["dirty_digest"]


def test_version_label_commit_names_the_commit_and_an_unknown_rule_is_refused(fixture_repo):
    c = freeze(fixture_repo, subdir="pkg", version_label="commit")
    assert c["release_version"] == f"1.2.3+g{c['commit'][:12]}"
    assert freeze(fixture_repo, subdir="pkg", version_label="package")["release_version"] == "1.2.3"
    with pytest.raises(SnapshotError, match="version_label 'date'"):
        freeze(fixture_repo, subdir="pkg", version_label="date")
