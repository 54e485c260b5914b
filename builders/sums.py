"""SHA256SUMS for built artifacts and their SBOMs, in the release directory's layout.

The format itself (and its strict parser) is releases.sums; this only names the files the
way a release directory holds them: artifacts/<name> and sbom/<name>.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from builders.errors import BuilderError
from releases.canonical import file_sha256
from releases.sums import SUMS_NAME, format_sums


def sums_entries(artifacts: Iterable[str | Path], sboms: Iterable[str | Path] = ()) -> dict[str, str]:
    entries: dict[str, str] = {}
    for folder, paths in (("artifacts", artifacts), ("sbom", sboms)):
        for p in map(Path, paths):
            rel = f"{folder}/{p.name}"
            if rel in entries:
                raise BuilderError(f"two files would both be {rel} in SHA256SUMS")
            entries[rel] = file_sha256(p)
    return entries


def sums_bytes(artifacts: Iterable[str | Path], sboms: Iterable[str | Path] = ()) -> bytes:
    """The SHA256SUMS text: '<sha256>  <artifacts|sbom>/<name>' lines, sorted."""
    return format_sums(sums_entries(artifacts, sboms))


def write_sums(out_dir: str | Path, artifacts: Iterable[str | Path],
               sboms: Iterable[str | Path] = ()) -> Path:
    path = Path(out_dir) / SUMS_NAME
    path.write_bytes(sums_bytes(artifacts, sboms))
    return path
