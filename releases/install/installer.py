"""install and --repair: fetch and verify first (outside the prefix), then one journalled
transaction that creates releases/<version>/ and swaps `current`."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path, PurePosixPath

from releases.canonical import file_sha256
from releases.install import faults
from releases.install.activate import swap_current, write_previous
from releases.install.errors import InstallError
from releases.install.fetch import fetch_release, remove_scratch, scratch_dir, verify_fetched
from releases.install.journal import Journal
from releases.install.layout import Prefix, check_version
from releases.install.venv import check_engine, make_venv
from releases.release_dir import MANIFEST

RELEASE_RECORD = "release.json"   # written last into releases/<version>/: the release is complete


def _wheel_version(name: str) -> str:
    parts = name[:-len(".whl")].split("-")
    return parts[1] if len(parts) >= 5 else ""


def _payload(manifest: dict) -> tuple[dict, list[dict]]:
    wheels = [a for a in manifest.get("artifacts", []) if a.get("kind") == "wheel"]
    if len(wheels) != 1:
        raise InstallError(f"the release ships {len(wheels)} wheels; the installer needs exactly one", where=MANIFEST)
    kernels = [a for a in manifest.get("artifacts", []) if a.get("kind") == "kernels"]
    return wheels[0], kernels


def release_record(prefix: Prefix, version: str) -> dict | None:
    try:
        return json.loads((prefix.release(version) / RELEASE_RECORD).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def repair(prefix: Prefix) -> dict:
    """Finish a transaction that had activated (only its commit was missing), undo any other."""
    journal = Journal.load(prefix)
    if journal is None:
        return {"action": "none", "version": None, "deleted_targets": 0}
    if journal.phase == "activated":
        journal.commit()
        return {"action": "finished", "version": journal.version, "deleted_targets": 0}
    deleted = journal.undo()
    return {"action": "undone", "version": journal.version, "phase": journal.phase, "deleted_targets": deleted}


def _begin(prefix: Prefix, version: str, source: str) -> Journal:
    """Create the prefix and its state folder (recorded as targets when this transaction made them)."""
    made = [d for d in (prefix.root, prefix.state) if not d.exists()]
    for d in made:
        d.mkdir(parents=True)
    journal = Journal(prefix, version, source)
    journal.targets = [{"path": d.relative_to(prefix.root).as_posix(), "kind": "dir"} for d in made]
    journal.save()
    return journal


def _create_release(journal: Journal, fetched: Path, manifest: dict, base_python: str) -> None:
    prefix, version = journal.prefix, journal.version
    wheel, kernels = _payload(manifest)
    rdir = prefix.release(version)
    journal.mkdir(rdir / "artifacts")
    local_wheel = rdir / "artifacts" / PurePosixPath(wheel["path"]).name
    shutil.copyfile(fetched / wheel["path"], local_wheel)
    for k in kernels:
        journal.mkdir(rdir / "kernels")
        shutil.copyfile(fetched / k["path"], rdir / "kernels" / PurePosixPath(k["path"]).name)
    faults.at("venv")
    make_venv(base_python, rdir / "venv", local_wheel)
    check_engine(rdir / "venv", _wheel_version(local_wheel.name))
    record = {"version": version, "manifest_sha256": file_sha256(fetched / MANIFEST), "wheel": local_wheel.name,
              "wheel_sha256": wheel["sha256"], "kernels": [PurePosixPath(k["path"]).name for k in kernels],
              "source": journal.source}
    (rdir / RELEASE_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def activate(journal: Journal) -> str | None:
    """Swap `current` to the journal's version and record the one it replaced; returns that one."""
    prefix = journal.prefix
    old = prefix.current_version()
    journal.set_phase("activating")
    journal.replace(prefix.current, os.readlink(prefix.current) if os.path.islink(prefix.current) else None)
    journal.replace(prefix.previous_file, prefix.previous_file.read_text(encoding="utf-8")
                    if prefix.previous_file.exists() else None)
    swap_current(prefix, journal.version)
    faults.at("activation")
    if old is not None and old != journal.version:
        write_previous(prefix, old)
    journal.set_phase("activated")
    return old if old != journal.version else prefix.previous_version()


def created_count(journal: Journal) -> int:
    """Targets this transaction created: recorded paths, and replaced paths that did not exist."""
    return len(journal.targets) + sum(1 for v in journal.replaced.values() if v is None)


def install(url: str, prefix_dir: str | Path, key: str | Path, *, base_python: str | None = None,
            repair_first: bool = False, commit: bool = True) -> tuple[dict, Journal | None]:
    """Install the release at URL into the prefix. Returns (result, journal): the journal is open
    (not committed) only when commit=False and something was installed, so that `upgrade` can
    undo the whole transaction if the new release fails to start."""
    prefix = Prefix.at(prefix_dir)
    if not Path(key).is_file():
        raise InstallError("public key file not found", where=str(key))
    repaired = repair(prefix) if repair_first else None
    pending = Journal.load(prefix)
    if pending is not None:
        raise InstallError(f"an interrupted install of {pending.version} (phase {pending.phase}) is pending; "
                           "run `install URL --prefix DIR --key KEY --repair`", where=str(prefix.journal))
    scratch = scratch_dir(prefix.root)
    try:
        manifest = fetch_release(url, scratch)
        verify_fetched(scratch, key)
        version = check_version(manifest["version"], MANIFEST)
        manifest_sha = file_sha256(scratch / MANIFEST)
        result = {"version": version, "previous_release": prefix.previous_version()}
        if repaired is not None:
            result["repair"] = repaired
        existing = release_record(prefix, version)
        if existing is not None and existing["manifest_sha256"] != manifest_sha:
            raise InstallError(f"version {version} is already installed from another manifest "
                               f"({existing['manifest_sha256'][:16]}…); refusing to replace it",
                               where=str(prefix.release(version)))
        if existing is not None and prefix.current_version() == version:
            return {"status": "already_installed", **result, "targets": 0}, None
        if existing is None and prefix.release(version).exists():
            raise InstallError("an incomplete release directory without a journal; remove it or run --repair",
                               where=str(prefix.release(version)))
        journal = _begin(prefix, version, url)
        try:
            if existing is None:
                _create_release(journal, scratch, manifest, base_python or sys.executable)
            previous = activate(journal)
        except BaseException as exc:
            deleted = journal.undo()
            if isinstance(exc, InstallError):
                raise InstallError(f"{exc.message} (transaction undone: {deleted} targets deleted)",
                                   where=exc.where) from None
            raise
        out = {"status": "installed", **result, "previous_release": previous, "targets": created_count(journal)}
        if commit:
            journal.commit()
            return out, None
        return out, journal
    finally:
        remove_scratch(scratch)
