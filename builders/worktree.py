"""Files of a source subdirectory: the working-tree view and writing a tree out safely."""
from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from builders.errors import SnapshotError
from builders.gitcmd import git


def working_files(root: Path, sub: str) -> list[tuple[str, Path]]:
    """Tracked and untracked-not-ignored files under SUB that exist now, as (path in SUB, path)."""
    out = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
              "--", sub or ".")
    files = {}
    for raw in out.split(b"\0"):
        if not raw:
            continue
        full = raw.decode("utf-8", "surrogateescape")
        path = root / full
        # Tracked files deleted in the working tree are listed by --cached but are not built.
        if not os.path.lexists(path) or path.is_dir() and not path.is_symlink():
            continue
        files[full[len(sub) + 1:] if sub else full] = path
    return sorted(files.items())


def write_tree_files(dest: Path, entries: list[tuple[str, str, bytes]]) -> None:
    """Write (git mode, relative path, content) entries under DEST, refusing escaping paths."""
    for mode, rel, data in entries:
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
            raise SnapshotError(f"refusing to write {rel!r} outside {dest}")
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            os.symlink(data.decode("utf-8", "surrogateescape"), target)
            continue
        target.write_bytes(data)
        # Git records only "executable or not"; the build sees exactly that, not the umask.
        os.chmod(target, 0o755 if mode == "100755" else 0o644)
