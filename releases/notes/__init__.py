"""Release notes rendered from a release's records: every figure links to the file and JSON
pointer it came from (docs/INTERFACES.md, "Release notes"). `render_notes` is the entry point."""
from releases.notes.bind import check_notes, write_notes
from releases.notes.render import NOTES_FILES, render_notes

__all__ = ["NOTES_FILES", "check_notes", "render_notes", "write_notes"]
