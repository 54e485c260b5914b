"""render_notes: the release notes of a release directory, in Markdown or HTML, byte-deterministic
for the same records."""
from __future__ import annotations

from pathlib import Path

from releases.errors import RecordError
from releases.notes import html, markdown, review, sections, verdicts
from releases.notes.source import Release

FORMATS = ("md", "html")
# Where the pipeline writes the notes inside a release (docs/INTERFACES.md).
NOTES_FILES = {"md": "notes/RELEASE-NOTES.md", "html": "notes/RELEASE-NOTES.html"}


def render_notes(release_dir: str | Path, fmt: str = "md", *, manifest: dict | None = None) -> str:
    """Render the notes from the records the manifest binds (manifest.json, or `manifest` when the
    caller is about to write that one). Raises RecordError for a file that is missing, altered
    or malformed; it does not check signatures: verify the release first."""
    if fmt not in FORMATS:
        raise RecordError(f"notes format {fmt!r} is not one of {', '.join(FORMATS)}")
    rel = Release(release_dir, manifest)
    blocks = (sections.header(rel) + sections.built(rel) + sections.reproducibility(rel) + sections.lanes(rel)
              + verdicts.verdicts(rel) + review.waivers(rel) + review.review(rel) + review.approval(rel))
    if fmt == "md":
        return markdown.write(blocks)
    return html.write(blocks, title=f"Release {rel.manifest['version']}")
