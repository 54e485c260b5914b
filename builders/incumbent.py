"""The incumbent: the engine users run today, which every judged gate measures the candidate against.

Resolution order:
1. the latest published release in the store: its wheel, downloaded and checked against the
   release's SHA256SUMS (and the manifest's own entry);
2. otherwise the config's `[incumbent]`: `ref` (a git ref of this repository's engine source,
   frozen, exported and built once by the release recipe on the local host, then cached under
   the state directory by commit) or `wheel` (a path to a wheel).
The identity it returns is what a verdict names: {version, wheel_sha256, source_commit, origin}.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from builders.errors import BuilderError, IncumbentError
from builders.recipe import build
from builders.snapshot import export_source, freeze
from hosts.local import LocalHost
from releases.canonical import file_sha256
from releases.errors import ReleaseError
from releases.publish import latest_published
from releases.sums import SUMS_NAME, parse_sums


@dataclass(frozen=True)
class Incumbent:
    identity: dict  # {"version", "wheel_sha256", "source_commit", "origin"}
    wheel: Path


def resolve_incumbent(config: dict, *, repo_dir: str | Path, state_dir: str | Path, store=None,
                      subdir: str = "engine", progress=None) -> Incumbent:
    """The incumbent: the store's latest published release, else `config` ({"ref": ...} or {"wheel": ...})."""
    cache = Path(state_dir) / "incumbent"
    if store is not None:
        try:
            version = latest_published(store)
        except ReleaseError as exc:
            raise IncumbentError("store", f"cannot list published releases: {exc}") from exc
        if version is not None:
            return from_store(store, version, cache / "store")
    if config.get("wheel"):
        return from_wheel(Path(config["wheel"]))
    if config.get("ref"):
        return from_ref(repo_dir, config["ref"], cache, subdir=config.get("subdir", subdir), progress=progress)
    raise IncumbentError("config", "no published release in the store and [incumbent] names neither ref nor wheel")


def from_store(store, version: str, cache: Path) -> Incumbent:
    """The published release's wheel, its sha256 checked against the release's SHA256SUMS."""
    try:
        manifest = json.loads(store.read_bytes(f"{version}/manifest.json"))
        sums = parse_sums(store.read_bytes(f"{version}/{SUMS_NAME}"), where=f"{version}/{SUMS_NAME}")
    except (ReleaseError, ValueError) as exc:
        raise IncumbentError("store", f"release {version}: {exc}") from exc
    wheels = [a for a in manifest.get("artifacts", []) if a.get("kind") == "wheel"]
    if len(wheels) != 1:
        raise IncumbentError("store", f"release {version}: {len(wheels)} wheels in the manifest, expected 1")
    entry = wheels[0]
    path = entry["path"]
    if sums.get(path) != entry.get("sha256"):
        raise IncumbentError("store", f"release {version}: {path} is {sums.get(path)} in {SUMS_NAME} "
                                      f"but {entry.get('sha256')} in the manifest")
    dest = cache / version / Path(path).name
    if not (dest.is_file() and file_sha256(dest) == sums[path]):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.part")
        try:
            store.get_file(f"{version}/{path}", tmp)
        except ReleaseError as exc:
            raise IncumbentError("store", f"release {version}: cannot download {path}: {exc}") from exc
        actual = file_sha256(tmp)
        if actual != sums[path]:
            tmp.unlink(missing_ok=True)
            raise IncumbentError("store", f"release {version}: {path} downloaded with sha256 {actual}, "
                                          f"{SUMS_NAME} says {sums[path]}")
        os.replace(tmp, dest)
    commit = (manifest.get("candidate") or {}).get("commit")
    return Incumbent({"version": _wheel_version(dest, "store"), "wheel_sha256": sums[path],
                      "source_commit": commit, "origin": "store"}, dest)


def from_wheel(wheel: Path) -> Incumbent:
    if not wheel.is_file():
        raise IncumbentError("wheel", f"{wheel} is not a file")
    return Incumbent({"version": _wheel_version(wheel, "wheel"), "wheel_sha256": file_sha256(wheel),
                      "source_commit": None, "origin": "wheel"}, wheel)


def from_ref(repo_dir: str | Path, ref: str, cache: Path, *, subdir: str = "engine", progress=None) -> Incumbent:
    """Build REF's engine once by the release recipe on this machine; later calls reuse the cache."""
    try:
        candidate = freeze(repo_dir, ref, subdir)
    except BuilderError as exc:
        raise IncumbentError("ref", f"{ref}: {exc}") from exc
    commit = candidate["commit"]
    slot = cache / commit
    identity_file = slot / "identity.json"
    if identity_file.is_file():
        identity = json.loads(identity_file.read_text("utf-8"))
        wheel = slot / identity["wheel"]
        if wheel.is_file() and file_sha256(wheel) == identity["wheel_sha256"]:
            return Incumbent({k: identity[k] for k in ("version", "wheel_sha256", "source_commit", "origin")}, wheel)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".build-{commit[:12]}-") as tmp:
        source = export_source(repo_dir, candidate, Path(tmp) / "src")
        sink = (lambda label, stream, text: progress(text)) if progress else None
        try:
            # The wheel only: the incumbent is served from it, and the kernels step would cost minutes.
            result = build(LocalHost(), candidate, source, "incumbent", str(Path(tmp) / "build"), progress=sink,
                           kernels_step=False)
        except BuilderError as exc:
            raise IncumbentError("ref", f"{ref} ({commit[:12]}): {exc}") from exc
        wheel = next((p for p in result.artifacts if p.suffix == ".whl"), None)
        if wheel is None:
            raise IncumbentError("ref", f"{ref} ({commit[:12]}): the build produced no wheel")
        staged = Path(tmp) / "slot"
        staged.mkdir()
        shutil.copy2(wheel, staged / wheel.name)
        identity = {"version": _wheel_version(wheel, "ref"), "wheel_sha256": file_sha256(staged / wheel.name),
                    "source_commit": commit, "origin": "ref", "wheel": wheel.name}
        (staged / "identity.json").write_text(json.dumps(identity, indent=1, sort_keys=True) + "\n")
        shutil.rmtree(slot, ignore_errors=True)  # a half-written slot from a killed run
        os.replace(staged, slot)  # the cache entry appears whole or not at all
    return Incumbent({k: identity[k] for k in ("version", "wheel_sha256", "source_commit", "origin")},
                     slot / identity["wheel"])


def _wheel_version(wheel: Path, origin: str) -> str:
    try:
        return str(parse_wheel_filename(wheel.name)[1])
    except InvalidWheelFilename as exc:
        raise IncumbentError(origin, f"{wheel.name}: {exc}") from exc
