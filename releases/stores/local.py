"""LocalStore: a directory tree; objects appear whole (temp file + hard link) and read-only.

A put writes its temp file under `<root>/.incoming/`, never inside a version folder: a crash
mid-upload then leaves nothing in `<version>/` but whole objects, so the folder stays a valid
(if unfinished) release that a rerun completes. Each put also sweeps what crashed puts left:
temp files of processes that are gone, and `.put-*` files that older versions of this store
wrote next to the object (which made a published folder fail verification forever).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from releases.canonical import file_sha256
from releases.errors import PublishRefused, StoreError
from releases.stores.base import check_key

INCOMING = ".incoming"
LEGACY_TEMP_PREFIX = ".put-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


class LocalStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    @property
    def incoming(self) -> Path:
        """Where puts in progress live: same filesystem as the objects (so link() works), outside
        every key (check_key refuses segments starting with '.')."""
        return self.root / INCOMING

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def put_file(self, key: str, path: str | Path) -> str:
        dest = self._path(key)
        sha = file_sha256(path)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.incoming.mkdir(exist_ok=True)
            self._sweep(dest.parent)
            # The pid in the name lets a later put tell a crashed put's file from a running one's.
            fd, tmp = tempfile.mkstemp(dir=self.incoming, prefix=f"{os.getpid()}-")
        except OSError as exc:
            raise StoreError(f"{self!r}: cannot write {key}: {exc}") from exc
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

    def _sweep(self, folder: Path) -> None:
        """Remove what crashed puts left: legacy temp files in the object's folder, and temp files
        under .incoming/ whose writer process is gone."""
        for stale in folder.glob(LEGACY_TEMP_PREFIX + "*"):
            stale.unlink(missing_ok=True)
        for entry in self.incoming.iterdir():
            pid, sep, _ = entry.name.partition("-")
            if sep and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
                entry.unlink(missing_ok=True)

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
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]  # .incoming/: puts in progress
            for name in filenames:
                if name.startswith("."):
                    continue  # not a key (check_key refuses dot-segments)
                key = (Path(dirpath) / name).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)
