"""Real lane evidence for the tests: the engine committed into a git repository, its candidate wheel
built with the release recipe, and the cpu-smoke lane run on it by gates.qualify (the tiny model,
a live engine), signed with a lane key of the test's own. Also a release staged through the
ReleaseStager from real builds of a later candidate."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from builders import compare, kernels, recipe, sbom, snapshot
from gates.qualify import qualify
from gates.spec import LaneSpec
from hosts.local import LocalHost
from releases import keys
from releases.canonical import file_sha256
from releases.receipts import subject
from releases.stage import ReleaseStager
from tests.kernels_subset import small_kernels

ROOT = Path(__file__).resolve().parents[2]
LANE = "smoke-evidence"


def git(repo: Path, *args: str, date: str = "2026-01-02T03:04:05+00:00") -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def engine_repo(path: Path) -> Path:
    """A git repository holding this checkout's engine/ (tracked and untracked files)."""
    path.mkdir(parents=True)
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "engine"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    for rel in listed:
        if (ROOT / rel).is_file():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, path / rel)
    (path / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    (path / "README.md").write_text("outside the engine\n")
    small_kernels(path)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "engine")
    return path


def commit(repo: Path, rel: str, text: str, date: str) -> None:
    (repo / rel).write_text(text)
    git(repo, "add", "-A", date=date)
    git(repo, "commit", "-q", "-m", f"change {rel}", date=date)


@dataclass
class Built:
    candidate: dict
    builds: tuple          # (BuildResult a, BuildResult b)
    wheel: Path
    folder: Path


def build_candidate(repo: Path, where: Path, *, twice: bool) -> Built:
    candidate = snapshot.freeze(repo, subdir="engine", version_label="commit")
    source = snapshot.export_source(repo, candidate, where / "source")
    if twice:
        builds = recipe.build_twice(LocalHost("a"), LocalHost("b"), candidate, source, str(where / "work"),
                                    local_dir=where / "artifacts", timeout=600)
    else:
        builds = (recipe.build(LocalHost("a"), candidate, source, "a", str(where / "work" / "a"), timeout=600),)
    wheel = next(p for p in builds[0].artifacts if p.suffix == ".whl")
    return Built(candidate, builds, wheel, where)


@dataclass
class LaneEvidence:
    repo: Path
    first: Built
    directory: Path          # holds receipts/
    lane_key: Ed25519PrivateKey
    public_key_file: Path


def make_evidence(tmp: Path) -> LaneEvidence:
    repo = engine_repo(tmp / "repo")
    first = build_candidate(repo, tmp / "first", twice=False)
    lane_key = Ed25519PrivateKey.generate()
    pub = tmp / "keys" / f"{LANE}.pub.pem"
    pub.parent.mkdir(parents=True)
    pub.write_bytes(keys.public_pem(lane_key.public_key()))
    spec = LaneSpec(name=LANE, kind="cpu-smoke", host="local", lease_path=str(tmp / "leases" / "gpu"))
    result = qualify(LocalHost(), spec, first.candidate, first.wheel, tmp / "qualify-out", key=lane_key)
    assert result.verdict == "pass", [(o.name, o.status, o.facts.get("reason")) for o in result.phases]
    # What an operator commits: receipts/ only (state/, work/ and keys/ stay on the lane host).
    evidence = tmp / "evidence" / LANE
    shutil.copytree(tmp / "qualify-out" / "receipts", evidence / "receipts")
    return LaneEvidence(repo, first, evidence, lane_key, pub)


def write_config(tmp: Path, ev: LaneEvidence, *, optional: bool = False) -> Path:
    cfg = tmp / "assay.toml"
    cfg.write_text(f"""
[release]
name = "evidence-test"
source = "{ev.repo}"
subdir = "engine"
approvers = ["local-operator"]
allow_unsigned_approval = true

[paths]
state = "{tmp / 'state'}"

[store]
kind = "filesystem"
path = "{tmp / 'store'}"

[build]
hosts = ["local", "local"]

[[lanes]]
name = "{LANE}"
kind = "cpu-smoke"
host = "lane-host"
evidence = "{ev.directory}"
public_key_file = "{ev.public_key_file}"
optional = {str(optional).lower()}
""")
    return cfg


def stage_release(ws: Path, built: Built, release_key_dir: Path) -> ReleaseStager:
    """Everything the release run stages before its lanes, from real builds and a real comparison."""
    staged, _ = ReleaseStager.open(ws, release_key_dir)
    staged.add_candidate(built.candidate)
    for b in built.builds:
        staged.add_receipt("build", b.subjects, b.record, label=b.label)
    a, b = built.builds
    record = compare.compare(a.artifacts[0].parent, b.artifacts[0].parent, built.candidate)
    staged.add_receipt("reproducibility", [subject(f["name"], f["a_sha256"]) for f in record["files"]], record)
    for p in a.artifacts:
        staged.add_artifact(p, kernels.artifact_kind(p.name))
    for fmt, path in sbom.write_sboms(built.wheel, built.candidate, built.folder / "sbom").items():
        staged.add_sbom(path, fmt)
    staged.write_sums()
    return staged


def wheel_sha(built: Built) -> str:
    return file_sha256(built.wheel)
