"""The notes inside a release: written next to the records they were rendered from, bound by
digest in the manifest, and checked by rendering them again (the notes are a pure function of
the records, so any edit to them, or to a record, shows)."""
from __future__ import annotations

from pathlib import Path

from releases.atomic import write_atomic
from releases.canonical import sha256_hex
from releases.errors import Failure, ReleaseError
from releases.notes.render import FORMATS, NOTES_FILES, render_notes


def write_notes(release_dir: str | Path, *, manifest: dict | None = None) -> list[dict]:
    """Render both formats into notes/ and return the manifest's `notes` entries:
    [{"path": "notes/RELEASE-NOTES.md", "sha256", "format": "md"}, {... "html"}]."""
    root = Path(release_dir)
    entries = []
    for fmt in FORMATS:
        data = render_notes(root, fmt, manifest=manifest).encode("utf-8")
        path = root / NOTES_FILES[fmt]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        entries.append({"path": NOTES_FILES[fmt], "sha256": sha256_hex(data), "format": fmt})
    return entries


def check_notes(release_dir: str | Path, manifest: dict) -> list[Failure]:
    """Every way the bound notes differ from the notes the records render now (empty: they match)."""
    root = Path(release_dir)
    failures = []
    for n, entry in enumerate(manifest.get("notes", [])):
        try:
            expected = render_notes(root, entry["format"], manifest=manifest).encode("utf-8")
        except ReleaseError as exc:
            failures.append(Failure(entry["path"], f"notes/{n}", f"cannot render the notes: {exc}"))
            continue
        try:
            data = (root / entry["path"]).read_bytes()
        except OSError as exc:
            failures.append(Failure(entry["path"], f"notes/{n}", f"cannot read: {exc.strerror or exc}"))
            continue
        if sha256_hex(data) != entry["sha256"]:
            failures.append(Failure(entry["path"], "sha256", "sha256 differs from the manifest's"))
        elif data != expected:
            failures.append(Failure(entry["path"], f"notes/{n}", "the notes differ from what the records render"))
    return failures
