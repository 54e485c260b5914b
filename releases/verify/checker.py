"""The state of one verification run: the root, the failures found, the counts, and reading files.

Every read is bounded: a record is read only when its size is under MAX_RECORD_BYTES, an artifact
is hashed as a stream, and a size the manifest names is compared before anything is read."""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Iterable

from releases.canonical import load_json_bytes, sha256_hex
from releases.errors import Failure, RecordError
from releases.schema import errors as schema_errors

MAX_RECORD_BYTES = 64 << 20  # receipts, SBOMs and the manifest are far smaller; anything larger is hostile
_CHUNK = 1 << 20


class Checker:
    """Shared state of one verification run: the root, the failures found, the counts."""

    def __init__(self, root: Path, extra_markers: Iterable[str]) -> None:
        self.root = root
        self.failures: list[Failure] = []
        self.warnings: list[str] = []
        self.counts = {"files": 0, "digests": 0, "signatures": 0, "records": 0}
        self.extra = tuple(extra_markers)
        self._bytes: dict[str, bytes | None] = {}
        self._digests: dict[str, str | None] = {}

    def fail(self, file: str, fieldname: str, message: str) -> None:
        self.failures.append(Failure(file, fieldname, message))

    def _plain_file(self, rel: str, field_in_manifest: str) -> os.stat_result | None:
        """lstat of a plain file inside the release, or None after recording why it is not one."""
        path = self.root / rel
        try:
            st = path.lstat()
        except FileNotFoundError:
            self.fail(rel, field_in_manifest, "missing: named by the manifest but not in the directory")
            return None
        except OSError as exc:
            self.fail(rel, field_in_manifest, f"cannot be read: {exc.strerror}")
            return None
        if stat.S_ISLNK(st.st_mode):
            self.fail(rel, field_in_manifest, "is a symbolic link; a release holds plain files only")
        elif not path.resolve().is_relative_to(self.root.resolve()):
            self.fail(rel, field_in_manifest, "resolves outside the release directory")
        elif not stat.S_ISREG(st.st_mode):
            self.fail(rel, field_in_manifest, "is not a plain file")
        else:
            return st
        return None

    def read(self, rel: str, field_in_manifest: str = "") -> bytes | None:
        """Bytes of a record the manifest names (at most MAX_RECORD_BYTES), or None after recording why not."""
        if rel in self._bytes:
            return self._bytes[rel]
        data = None
        st = self._plain_file(rel, field_in_manifest)
        if st is not None and st.st_size > MAX_RECORD_BYTES:
            self.fail(rel, field_in_manifest, f"{st.st_size} bytes: larger than a record may be ({MAX_RECORD_BYTES})")
        elif st is not None:
            try:
                data = (self.root / rel).read_bytes()
            except OSError as exc:
                self.fail(rel, field_in_manifest, f"cannot be read: {exc.strerror}")
        self._bytes[rel] = data
        return data

    def sha256(self, rel: str, field_in_manifest: str = "", size: int | None = None) -> str | None:
        """Streamed sha256 of a file; with `size`, a file of another size is refused unread."""
        if rel in self._digests:
            return self._digests[rel]
        digest = None
        st = self._plain_file(rel, field_in_manifest)
        if st is not None and size is not None and st.st_size != size:
            self.fail(rel, "size", f"{st.st_size} bytes, the manifest ({field_in_manifest}) says {size}; not read")
        elif st is not None:
            try:
                h = hashlib.sha256()
                with open(self.root / rel, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        h.update(chunk)
                digest = h.hexdigest()
            except OSError as exc:
                self.fail(rel, field_in_manifest, f"cannot be read: {exc.strerror}")
        self._digests[rel] = digest
        return digest

    def json(self, rel: str, kind: str | None, field_in_manifest: str = "") -> Any:
        data = self.read(rel, field_in_manifest)
        if data is None:
            return None
        try:
            obj = load_json_bytes(data, where=rel)
        except RecordError as exc:
            self.fail(rel, "", exc.message)
            return None
        if kind is not None:
            errs = schema_errors(kind, obj)
            for err in errs:
                self.fail(rel, err.path or "/", f"{kind} schema: {err.message}")
            self.counts["records"] += 1
            if errs:
                return None
        return obj

    def check_digest(self, rel: str, expected: str, manifest_field: str, size: int | None = None) -> None:
        """The file's sha256 (streamed; refused unread when `size` differs) is the one the manifest names."""
        if size is None and rel not in self._digests:
            data = self.read(rel, manifest_field)  # a record: read once, hashed from memory, reused later
            self._digests[rel] = None if data is None else sha256_hex(data)
        actual = self.sha256(rel, manifest_field, size)
        if actual is not None:
            self.counts["digests"] += 1
            if actual != expected:
                self.fail(rel, "sha256",
                          f"digest {actual[:16]}... differs from manifest {manifest_field} {expected[:16]}...")
