"""`assay publish`: an approved release directory to the store, or the completion of a publish
that stopped part-way (releases/publish.py does the write-once work; this finds what to publish)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from flows.config import Config
from releases.canonical import load_json_bytes
from releases.errors import PublishRefused, RecordError
from releases.publish import publish_release, store_state
from releases.release_dir import MANIFEST


def _manifest(release: Path) -> dict:
    path = release / MANIFEST
    if not path.is_file():
        raise RecordError(f"{release} holds no {MANIFEST}: not a staged release directory", where=str(path))
    return load_json_bytes(path.read_bytes(), where=str(path))


def staged_releases_for(cfg: Config, versions: list[str]) -> dict[str, Path]:
    """The approved release directory the runs of this state root staged for each of `versions`."""
    found = {}
    for manifest in sorted(cfg.work_dir.glob(f"run-*/release/{MANIFEST}")):
        try:
            record = load_json_bytes(manifest.read_bytes(), where=str(manifest))
        except RecordError:
            continue  # a run that stopped while writing is no candidate for a publish
        if record.get("version") in versions and record.get("state") == "published":
            found.setdefault(record["version"], manifest.parent)
    return found


def publish_approved(release: Path, store, *, public_key, resume: bool, say: Callable[[str], None] = print) -> tuple[str, str]:
    """Publish `release` (state published); return (version, the store's state of it before).

    Without `resume`, a version the store holds part of is refused: completing another attempt's
    objects is something a person asks for by name. With it, the objects already there must be the
    release's own, byte for byte (write-once), and only the rest is uploaded, manifest last."""
    manifest = _manifest(release)
    version = manifest["version"]
    before = store_state(store, version)
    if before == "published":
        if store.read_bytes(f"{version}/{MANIFEST}") != (release / MANIFEST).read_bytes():
            raise PublishRefused(f"{version} is already published with another manifest; a published release is "
                                 "never replaced", key=f"{version}/{MANIFEST}")
        return version, before
    if before == "unfinished" and not resume:
        raise PublishRefused(f"the store holds an unfinished publish of {version} (assets, no manifest): "
                             "`assay publish --resume` completes it", key=f"{version}/")
    result = publish_release(release, store, version, public_key=public_key,
                             progress=lambda k, done, total: say(f"uploaded {done}/{total}: {k}"))
    if result.kept:
        say(f"{len(result.kept)} object(s) of the unfinished publish were already there and identical; kept")
    return version, before
