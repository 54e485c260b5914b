"""LocalStore: a directory tree; objects appear whole (temp file + hard link) and read-only."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from releases.canonical import file_sha256
from releases.errors import PublishRefused, StoreError
from releases.stores.base import check_key


class LocalStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def put_file(self, key: str, path: str | Path) -> str:
        dest = self._path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        sha = file_sha256(path)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".put-")
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
                shutil.copyfileobj(src, out)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o444)
            try:
                # link() fails if dest exists: the write-once check and the publish are one atomic step.
                os.link(tmp, dest)
            except FileExistsError:
                existing = file_sha256(dest)
                if existing != sha:
                    raise PublishRefused(f"store key {key} already holds different bytes; refusing to overwrite",
                                         key=key) from None
        except OSError as exc:
            raise StoreError(f"{self!r}: cannot write {key}: {exc}") from exc
        finally:
            Path(tmp).unlink(missing_ok=True)
        return sha

    def get_file(self, key: str, path: str | Path) -> None:
        src = self._path(key)
        if not src.is_file():
            raise StoreError(f"{self!r}: no object {key}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, path)

    def read_bytes(self, key: str) -> bytes:
        src = self._path(key)
        if not src.is_file():
            raise StoreError(f"{self!r}: no object {key}")
        return src.read_bytes()

    def list(self, prefix: str = "") -> list[str]:
        keys = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith("."):
                    continue  # a put in progress (".put-*") is not an object
                key = (Path(dirpath) / name).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)
