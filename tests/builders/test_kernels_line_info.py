"""The acceptance line "a cubin compiled with line info from two paths is caught and attributed to the
build path": the real engine source, whose pyproject asks for line info (for a subset of the
registry's launches: tests/kernels_subset.py), built twice by `assay reproduce`
with the build path varied; the kernels artifact differs in its cubins only, and the bisection
blames the build path. Without line info (the engine's default) the kernels built from two paths are
identical: tests/builders/test_engine_build.py builds them twice, the build path among the
variations, and requires the same bytes."""
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders.conftest import git
from tests.kernels_subset import small_kernels

# Looked up, not imported: this process's Triton must first be imported under TRITON_INTERPRET=1
# (tests/conftest.py), and the builds below run in their own processes anyway.
if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed", allow_module_level=True)
ENGINE = Path(__file__).resolve().parents[2] / "engine"


def engine_repo(root: Path) -> Path:
    repo = root / "src"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shutil.copytree(ENGINE, repo / "engine", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    small_kernels(repo, line_info=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "engine snapshot")
    return repo


def reproduce(repo: Path, workdir: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "assay"
    return subprocess.run([str(exe), "reproduce", "--source", str(repo), "--subdir", "engine", "--variations",
                           "build_path", "--workdir", str(workdir), "--json"],
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_line_info_cubins_from_two_paths_are_blamed_on_the_build_path(tmp_path):
    proc = reproduce(engine_repo(tmp_path), tmp_path / "run")
    assert proc.returncode == 1, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["identical"] is False and out["variations"]["build_path"]["varied"] is True
    diffs = out["differences"]
    assert diffs, out
    assert {d["artifact"] for d in diffs} == {"assay_engine-0.1.0-kernels.tar"}
    cubins = [d for d in diffs if re.fullmatch(r"cache/[A-Z2-7]{52}/_\w+_kernel\.cubin", d["member"])]
    assert cubins
    # index.json lists every member's digest (as a wheel's RECORD does): it differs with them.
    assert {d["member"] for d in diffs} - {d["member"] for d in cubins} == {"index.json"}
    assert {d["cause"] for d in diffs} == {"build_path"}, diffs
    assert [t["variation"] for t in out["trials"]] == ["control", "build_path"]
    assert out["trials"][0]["differing"] == 0
