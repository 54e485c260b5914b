"""Release notes rendered from a release's records: every figure links to the file and JSON
pointer it came from (docs/INTERFACES.md, "Release notes"). `render_notes` is the entry point."""
from releases.notes.render import NOTES_FILES, render_notes

__all__ = ["NOTES_FILES", "render_notes"]
