"""The built bytes depend on the subdir alone: a commit outside it gives a byte-identical wheel and
sdist (SOURCE_DATE_EPOCH is the last commit that changed the subdir), a commit inside it changes
them. Real git repositories, real builds with the release recipe on this machine."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from builders.recipe import build
from builders.snapshot import export_source, freeze
from hosts.local import LocalHost
from tests.builders.conftest import COMMIT_EPOCH, fixture_files, make_repo, write_files

LATER = "2025-03-04T05:06:07+00:00"
LATER_EPOCH = 1741064767
LATEST = "2025-05-06T07:08:09+00:00"
LATEST_EPOCH = 1746515289


def commit_at(repo: Path, date: str, files: dict[str, str], message: str) -> str:
    write_files(repo, files)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
           "GIT_COMMITTER_NAME": "Fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    for args in (["add", "-A"], ["commit", "-q", "-m", message], ["rev-parse", "HEAD"]):
        out = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                             check=True, timeout=60)
    return out.stdout.strip()


def built(repo: Path, where: Path, ref: str = "HEAD") -> tuple[dict, dict[str, bytes]]:
    candidate = freeze(repo, ref=ref, subdir="pkg", version_label="commit")
    source = export_source(repo, candidate, where / "export")
    result = build(LocalHost("builder"), candidate, source, "a", str(where / "build"), timeout=300)
    return candidate, {p.name: p.read_bytes() for p in result.artifacts}


def test_epoch_is_the_last_commit_that_changed_the_subdir(tmp_path):
    repo = make_repo(tmp_path / "repo", fixture_files())
    first = freeze(repo, subdir="pkg")
    commit_at(repo, LATER, {"outside.txt": "changed outside the package\n"}, "unrelated")
    after_unrelated = freeze(repo, subdir="pkg")
    assert first["source_date_epoch"] == after_unrelated["source_date_epoch"] == COMMIT_EPOCH
    assert after_unrelated["commit"] != first["commit"] and after_unrelated["tree"] == first["tree"]
    commit_at(repo, LATEST, {"pkg/fixturepkg/data.py": "TABLE = [1, 2, 3, 4]\n"}, "engine change")
    assert freeze(repo, subdir="pkg")["source_date_epoch"] == LATEST_EPOCH
    commit_at(repo, "2025-06-01T00:00:00+00:00", {"outside.txt": "again\n"}, "unrelated again")
    assert freeze(repo, subdir="pkg")["source_date_epoch"] == LATEST_EPOCH
    # An older ref still takes the last subdir commit at or before it, not the newest.
    assert freeze(repo, ref="HEAD~2", subdir="pkg")["source_date_epoch"] == COMMIT_EPOCH


@pytest.mark.slow
def test_an_unrelated_commit_keeps_the_wheel_bytes_and_a_subdir_change_does_not(tmp_path):
    repo = make_repo(tmp_path / "repo", fixture_files())
    base_candidate, base = built(repo, tmp_path / "base")

    commit_at(repo, LATER, {"outside.txt": "changed outside the package\n", "docs/new.md": "x\n"}, "unrelated")
    other_candidate, other = built(repo, tmp_path / "unrelated")
    # A release of its own (another commit, another release version), the same bytes.
    assert other_candidate["commit"] != base_candidate["commit"]
    assert other_candidate["release_version"] != base_candidate["release_version"]
    assert sorted(other) == sorted(base) == ["fixture_pkg-1.2.3-py3-none-any.whl", "fixture_pkg-1.2.3.tar.gz"]
    assert other == base

    commit_at(repo, LATEST, {"pkg/fixturepkg/data.py": "TABLE = [1, 2, 3, 4]\n"}, "engine change")
    changed_candidate, changed = built(repo, tmp_path / "changed")
    assert changed_candidate["source_date_epoch"] == LATEST_EPOCH
    assert changed["fixture_pkg-1.2.3-py3-none-any.whl"] != base["fixture_pkg-1.2.3-py3-none-any.whl"]
    assert changed["fixture_pkg-1.2.3.tar.gz"] != base["fixture_pkg-1.2.3.tar.gz"]
