"""Fixture packages committed into real git repositories in temporary directories."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

COMMIT_DATE = "2025-01-02T03:04:05+00:00"
COMMIT_EPOCH = 1735787045

PYPROJECT = """\
[build-system]
requires = ["hatchling==1.29.0"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "{version}"
description = "Fixture package for builder tests."
requires-python = ">=3.11"
dependencies = ["numpy>=2.0", "jinja2>=3.1; python_version >= '3.11'"]
{extra}
[tool.hatch.build.targets.wheel]
packages = ["fixturepkg"]
"""

# A build hook that writes the current time into the wheel: the classic non-reproducible build.
CLOCK_HOOK = """\
import time
from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class ClockHook(BuildHookInterface):
    def initialize(self, version, build_data):
        stamp = f"BUILT_AT = {time.time_ns()!r}\\n"
        with open(f"{self.root}/fixturepkg/_stamp.py", "w") as fh:
            fh.write(stamp)
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
           "GIT_COMMITTER_NAME": "Fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
           "GIT_AUTHOR_DATE": COMMIT_DATE, "GIT_COMMITTER_DATE": COMMIT_DATE}
    out = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# A build hook that embeds where and as whom it ran: caught only because a and b vary both.
ENV_HOOK = """\
import os
from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class EnvHook(BuildHookInterface):
    def initialize(self, version, build_data):
        with open(f"{self.root}/fixturepkg/_stamp.py", "w") as fh:
            fh.write(f"BUILT_IN = {os.getcwd()!r}\\nBUILT_BY = {os.environ.get('USER')!r}\\n")
"""


def fixture_files(subdir: str = "pkg", name: str = "fixture-pkg", version: str = "1.2.3",
                  clock_hook: bool = False, env_hook: bool = False) -> dict[str, str]:
    hooked = clock_hook or env_hook
    extra = '[tool.hatch.build.targets.wheel.hooks.custom]\npath = "hatch_build.py"\n' if hooked else ""
    files = {
        f"{subdir}/pyproject.toml": PYPROJECT.format(name=name, version=version, extra=extra),
        f"{subdir}/fixturepkg/__init__.py": '"""Fixture."""\nVALUE = 42\n',
        f"{subdir}/fixturepkg/data.py": "TABLE = [1, 2, 3]\n",
        f"{subdir}/README.md": "fixture\n",
        "outside.txt": "not part of the package\n",
        ".gitignore": "*.pyc\n__pycache__/\n",
    }
    if hooked:
        files[f"{subdir}/hatch_build.py"] = CLOCK_HOOK if clock_hook else ENV_HOOK
        files[f"{subdir}/fixturepkg/_stamp.py"] = "BUILT_AT = 0\n"
    return files


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write_files(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "fixture")
    return path


@pytest.fixture
def fixture_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "fixture-src", fixture_files())


class Built:
    """One frozen fixture candidate built twice on the local host."""

    def __init__(self, root: Path, repo: Path, candidate: dict, source: Path, a, b, workroot: Path,
                 progress: list):
        self.root, self.repo, self.candidate, self.source = root, repo, candidate, source
        self.a, self.b, self.workroot, self.progress = a, b, workroot, progress

    @property
    def wheel_a(self) -> Path:
        return next(p for p in self.a.artifacts if p.name.endswith(".whl"))


def build_fixture(root: Path, files: dict[str, str], subdir: str = "pkg") -> Built:
    from builders.recipe import build_twice
    from builders.snapshot import export_source, freeze
    from hosts.local import LocalHost

    repo = make_repo(root / "src-repo", files)
    candidate = freeze(repo, subdir=subdir)
    source = export_source(repo, candidate, root / "export")
    workroot = root / "work"
    host_a, host_b = LocalHost("builder-a"), LocalHost("builder-b")
    progress: list[tuple[str, str, str]] = []
    a, b = build_twice(host_a, host_b, candidate, source, str(workroot), timeout=300,
                       progress=lambda *event: progress.append(event))
    return Built(root, repo, candidate, source, a, b, workroot, progress)


@pytest.fixture(scope="session")
def built_fixture(tmp_path_factory) -> Built:
    """The clean fixture package, frozen and built twice once for the whole session."""
    return build_fixture(tmp_path_factory.mktemp("built"), fixture_files())
