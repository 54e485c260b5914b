"""Publish a verified release directory to a write-once store; manifest.json is the commit point.

Order: every asset, then manifest.sig, then manifest.json LAST. A store key `<version>/manifest.json`
therefore means "complete"; anything under `<version>/` without it is an unfinished attempt that a
rerun completes (identical objects are accepted, different ones refused, and an object the release
does not hold refuses the whole publish before anything is written). manifest.sig goes before
manifest.json so that a committed release is never without its signature. `assay publish --resume`
is that rerun for a person (store_state names the three states a version can be in).
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from packaging.version import InvalidVersion, Version

from releases.canonical import sha256_hex
from releases.errors import PublishRefused, VerificationFailed
from releases.keys import load_public_key
from releases.manifest import load_manifest
from releases.release_dir import MANIFEST, MANIFEST_SIG
from releases.stores.base import Store, check_key
from releases.verify import VerificationReport, verify_release

Progress = Callable[[str, int, int], None]  # (key, done, total)


@dataclass
class PublishResult:
    version: str
    keys: list[str]  # the store's listing under <version>/ after publishing
    manifest_sha256: str
    uploaded: int
    report: VerificationReport  # verification of the copy downloaded back from the store
    kept: list[str] = field(default_factory=list)  # keys an unfinished publish had written already


def _upload_order(root: Path) -> list[str]:
    assets = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assets = [a for a in assets if a not in (MANIFEST, MANIFEST_SIG)]
    return assets + [MANIFEST_SIG, MANIFEST]


def publish_release(local_release_dir: str | Path, store: Store, version: str, *,
                    progress: Progress | None = None, public_key: Any = None,
                    private_markers: Iterable[str] = ()) -> PublishResult:
    """Verify locally, upload assets then the manifest, download it all back and verify again."""
    root = Path(local_release_dir)
    manifest_key = check_key(f"{version}/manifest.json")
    if store.exists(manifest_key):
        raise PublishRefused(f"{version} is already published in {store!r} ({manifest_key} exists)", key=manifest_key)
    markers = tuple(private_markers)
    report = verify_release(root, public_key=public_key, require_ready=True, private_markers=markers)
    if not report.ok:
        raise VerificationFailed(report.failures, what=f"local release {version}")
    raw = (root / MANIFEST).read_bytes()
    manifest = load_manifest(raw)
    if manifest["version"] != version:
        raise PublishRefused(f"manifest is for version {manifest['version']}, not {version}", key=manifest_key)
    if manifest["state"] != "published":
        raise PublishRefused(f"manifest state is {manifest['state']}; record the approval (state published) "
                             "before uploading", key=manifest_key)
    key = load_public_key(public_key if public_key is not None else root / manifest["public_key"]["path"])
    order = _upload_order(root)
    kept = store.list(f"{version}/")
    strangers = sorted(set(kept) - {f"{version}/{rel}" for rel in order})
    if strangers:
        raise PublishRefused(f"the store's unfinished {version}/ holds {len(strangers)} object(s) this release does not "
                             f"have ({', '.join(strangers[:5])}): it is another attempt's, not this one's to complete",
                             key=strangers[0])
    for done, rel in enumerate(order, start=1):
        store.put_file(f"{version}/{rel}", root / rel)
        if progress:
            progress(f"{version}/{rel}", done, len(order))
    keys = store.list(f"{version}/")
    with tempfile.TemporaryDirectory(prefix="assay-publish-check-") as tmp:
        for k in keys:
            store.get_file(k, Path(tmp) / k[len(version) + 1:])
        copy_report = verify_release(tmp, public_key=key, require_ready=True, private_markers=markers)
    if not copy_report.ok:
        raise VerificationFailed(copy_report.failures, what=f"published copy of {version} in {store!r}")
    return PublishResult(version, keys, sha256_hex(raw), len(order), copy_report, kept)


_MANIFEST_KEY = re.compile(r"^([^/]+)/manifest\.json$")


def _order(version: str) -> tuple:
    try:
        return (1, Version(version), version)
    except InvalidVersion:
        return (0, version)  # non-PEP 440 versions sort below every PEP 440 one, then by text


def published_versions(store: Store) -> list[str]:
    """Versions whose manifest.json (the commit point) is in the store, oldest first."""
    found = [m.group(1) for k in store.list("") if (m := _MANIFEST_KEY.match(k))]
    return sorted(found, key=_order)


def unfinished_versions(store: Store) -> list[str]:
    """Versions with objects in the store but no manifest.json: publishes that stopped part-way
    (a crash, a lost connection). Invisible to readers; a rerun of the same release completes them."""
    keys = store.list("")
    # staging/ holds composed releases an acceptance window downloads (releases/staging.py): not a version
    started = {k.split("/", 1)[0] for k in keys if "/" in k} - {"staging"}
    return sorted(started - set(published_versions(store)), key=_order)


def store_state(store: Store, version: str) -> str:
    """"published" (its manifest.json is there), "unfinished" (objects without the manifest: a
    publish that stopped part-way, which a rerun or `assay publish --resume` completes) or "absent"."""
    if store.exists(check_key(f"{version}/manifest.json")):
        return "published"
    return "unfinished" if store.list(f"{version}/") else "absent"


def latest_published(store: Store) -> str | None:
    """The highest published version (PEP 440 order), or None when nothing is published."""
    versions = published_versions(store)
    return versions[-1] if versions else None
