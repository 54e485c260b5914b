"""A real Prefect server for the flow tests, and a throwaway git repository holding a copy of the
engine's source, so that the flows freeze a clean commit whatever state this checkout is in."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flows.services import free_port, start_server, stop_pid
from tests.kernels_subset import KERNELS_TABLE, small_kernels

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """Start `prefect server start` on a free 127.0.0.1 port; stop it after the session."""
    home = tmp_path_factory.mktemp("prefect")
    service, proc = start_server(home / "home", home / "run", free_port(), home / "server.log", detached=True)
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    env = {"PREFECT_API_URL": service.url, "PREFECT_HOME": str(home / "home")}
    with temporary_settings(updates={PREFECT_API_URL: service.url, PREFECT_HOME: str(home / "home")}):
        yield env
    stop_pid(proc.pid)


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "assay-tests", "GIT_AUTHOR_EMAIL": "tests@assay.invalid",
           "GIT_COMMITTER_NAME": "assay-tests", "GIT_COMMITTER_EMAIL": "tests@assay.invalid",
           "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


@pytest.fixture(scope="session")
def engine_repo(tmp_path_factory) -> Path:
    """A git repository with this checkout's engine/ (tracked and untracked files) committed, its
    kernels step cut to a subset of the registry (small_kernels)."""
    return _engine_source(tmp_path_factory.mktemp("engine-source") / "enginerepo", kernels=True)


@pytest.fixture(scope="session")
def engine_repo_no_kernels(tmp_path_factory) -> Path:
    """engine_repo without the source's AOT kernels step: its builds make the wheel and the sdist
    only, as a source without a [tool.assay.kernels] table does. The flows whose subject is elsewhere
    (the approval gate's refusals, a failed judged gate and its waiver, a lost lane host) build it;
    the flows that publish and verify a release and the worker-fault run build engine_repo's."""
    return _engine_source(tmp_path_factory.mktemp("engine-source-nokernels") / "enginerepo", kernels=False)


def _engine_source(repo: Path, kernels: bool) -> Path:
    repo.mkdir()
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "engine"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    for rel in listed:
        src = ROOT / rel
        if src.is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / rel)
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    if kernels:
        small_kernels(repo)
    else:
        no_kernels(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "engine source for the flow tests")
    return repo


def no_kernels(repo: Path) -> None:
    """Take the [tool.assay.kernels] table out of the source's pyproject.toml (builders.kernels:
    a source without it has no kernels step)."""
    pyproject = repo / "engine" / "pyproject.toml"
    text = pyproject.read_text()
    assert KERNELS_TABLE in text, f"{pyproject}: the kernels table moved; update tests/prefect_fixtures.py"
    pyproject.write_text(text.replace(KERNELS_TABLE, ""))
