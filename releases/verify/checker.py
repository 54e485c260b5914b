"""The state of one verification run: the root, the failures found, the counts, and reading files."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from releases.canonical import load_json_bytes, sha256_hex
from releases.errors import Failure, RecordError
from releases.schema import errors as schema_errors


class Checker:
    """Shared state of one verification run: the root, the failures found, the counts."""

    def __init__(self, root: Path, extra_markers: Iterable[str]) -> None:
        self.root = root
        self.failures: list[Failure] = []
        self.warnings: list[str] = []
        self.counts = {"files": 0, "digests": 0, "signatures": 0, "records": 0}
        self.extra = tuple(extra_markers)
        self._cache: dict[str, bytes | None] = {}

    def fail(self, file: str, fieldname: str, message: str) -> None:
        self.failures.append(Failure(file, fieldname, message))

    def read(self, rel: str, field_in_manifest: str = "") -> bytes | None:
        """Bytes of a file the manifest names, or None after recording why it cannot be read."""
        if rel in self._cache:
            return self._cache[rel]
        path = self.root / rel
        data = None
        if path.is_symlink():
            self.fail(rel, field_in_manifest, "is a symbolic link; a release holds plain files only")
        elif not path.resolve().is_relative_to(self.root.resolve()):
            self.fail(rel, field_in_manifest, "resolves outside the release directory")
        elif not path.is_file():
            self.fail(rel, field_in_manifest, "missing: named by the manifest but not in the directory")
        else:
            data = path.read_bytes()
        self._cache[rel] = data
        return data

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

    def check_digest(self, rel: str, expected: str, manifest_field: str) -> bytes | None:
        data = self.read(rel, manifest_field)
        if data is not None:
            self.counts["digests"] += 1
            actual = sha256_hex(data)
            if actual != expected:
                self.fail(rel, "sha256", f"digest {actual[:16]}... differs from manifest {manifest_field} {expected[:16]}...")
        return data
