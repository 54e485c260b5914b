"""The release the notes are rendered from: its manifest, the files it binds by digest, and
figures, each a value tied to the file and JSON pointer it came from."""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from releases.canonical import load_json_bytes, sha256_hex
from releases.errors import RecordError
from releases.manifest import missing_for
from releases.schema import json_pointer, validate

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Fig:
    """A value read from a record, printed as `text` and linked to `href`."""

    value: Any
    path: str
    pointer: str

    @property
    def text(self) -> str:
        return fig_text(self.value)

    @property
    def href(self) -> str:
        return link(self.path, self.pointer)


def fig_text(value: Any) -> str:
    """How a figure is printed: strings as they are; numbers, booleans and null as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    raise RecordError(f"only scalars are figures, not a {type(value).__name__}")


def link(path: str, pointer: str) -> str:
    """`<file>#<JSON pointer>`; the pointer is percent-encoded as a URI fragment (RFC 6901
    section 6), every character but unreserved ones and '/' encoded."""
    return f"{quote(path, safe='/')}#{quote(pointer, safe='/')}"


def resolve(doc: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer; RecordError when there is none."""
    value = doc
    for raw in pointer.split("/")[1:] if pointer else []:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise RecordError(f"pointer {pointer} does not resolve")
    return value


def is_envelope(obj: Any) -> bool:
    return isinstance(obj, dict) and {"payloadType", "payload", "signatures"} <= set(obj)


def _without_notes(manifest: object) -> dict:
    """The manifest, validated, less its `notes` entry: the notes are not an input of the notes, so
    notes bound in a manifest render again to the same bytes. Pointers into manifest.json are
    unaffected (`notes` is a key of its own)."""
    if isinstance(manifest, dict) and "notes" in manifest:
        manifest = {k: v for k, v in manifest.items() if k != "notes"}
    validate("manifest", manifest, MANIFEST)
    missing = missing_for(manifest, manifest["state"])
    if missing:
        raise RecordError(f"state {manifest['state']} lacks {'; '.join(missing)}", where=MANIFEST)
    return manifest


class Release:
    """Reads a release directory through its manifest. A file is read only when the manifest
    binds it, and only when its bytes still have the bound digest; a DSSE envelope is read as
    its decoded payload (the in-toto Statement), which is what receipt pointers address."""

    def __init__(self, root: str | Path, manifest: dict | None = None) -> None:
        self.root = Path(root)
        if manifest is None:
            try:
                data = (self.root / MANIFEST).read_bytes()
            except OSError as exc:
                raise RecordError(f"cannot read the manifest: {exc.strerror or exc}", where=str(self.root / MANIFEST)) from exc
            manifest = load_json_bytes(data, where=MANIFEST)
        self.manifest = _without_notes(manifest)
        self._docs: dict[str, Any] = {MANIFEST: manifest}
        self.bound = {e["path"]: e["sha256"] for e in self._entries()}

    def _entries(self) -> list[dict]:
        m = self.manifest
        singles = [m[k] for k in ("candidate_record", "ledger", "approval") if k in m]
        return singles + list(m.get("receipts", [])) + list(m.get("waivers", []))

    def doc(self, path: str) -> Any:
        if path not in self._docs:
            if path not in self.bound:
                raise RecordError("the manifest does not bind this file", where=path)
            try:
                data = (self.root / path).read_bytes()
            except OSError as exc:
                raise RecordError(f"cannot read: {exc.strerror or exc}", where=path) from exc
            if sha256_hex(data) != self.bound[path]:
                raise RecordError("sha256 differs from the manifest's; verify the release first", where=path)
            obj = load_json_bytes(data, where=path)
            if is_envelope(obj):
                try:
                    obj = load_json_bytes(base64.b64decode(obj["payload"], validate=True), where=f"{path} payload")
                except binascii.Error as exc:
                    raise RecordError(f"payload is not base64: {exc}", where=path) from exc
            self._docs[path] = obj
        return self._docs[path]

    def get(self, path: str, pointer: str) -> Any:
        return resolve(self.doc(path), pointer)

    def fig(self, path: str, pointer: str | list) -> Fig:
        """A figure for the scalar at `pointer` (a JSON pointer or its list of tokens) in `path`."""
        if not isinstance(pointer, str):
            pointer = json_pointer(pointer)
        try:
            value = resolve(self.doc(path), pointer)
            fig_text(value)
        except RecordError as exc:
            raise RecordError(exc.message, where=f"{path}#{pointer}") from exc  # refuses a non-scalar here, where the pointer is known
        return Fig(value, path, pointer)

    def receipts(self, kind: str | None = None) -> list[tuple[dict, dict]]:
        """(manifest entry, statement) of every receipt the manifest lists, in manifest order."""
        out = []
        for entry in self.manifest.get("receipts", []):
            if kind is None or entry["kind"] == kind:
                out.append((entry, self.doc(entry["path"])))
        return out
