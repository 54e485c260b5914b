"""Identify a directory on disk the way the candidate names its source.

git_tree_id recomputes git's tree object id (SHA-1, as git stores it) from the files, so a
clean export can be checked against candidate["tree"] without git; files_digest is the
dirty digest (sha256 over sorted `<sha256>  <path>` lines) of a dirty export.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path


def git_tree_id(directory: str | Path) -> str:
    tree_id = _tree(Path(directory))
    return tree_id.hex() if tree_id is not None else _object("tree", b"").hex()


def files_digest(directory: str | Path) -> str:
    root = Path(directory)
    lines = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            lines.append(f"{hashlib.sha256(data).hexdigest()}  {path.relative_to(root).as_posix()}\n")
    return hashlib.sha256("".join(sorted(lines)).encode("utf-8")).hexdigest()


def _tree(directory: Path) -> bytes | None:
    """The tree object id of DIRECTORY, or None when it holds no files (git keeps no such tree)."""
    entries = []
    for entry in os.scandir(directory):
        path = Path(entry.path)
        if entry.is_symlink():
            entries.append((entry.name, b"120000", _object("blob", os.readlink(path).encode())))
        elif entry.is_dir():
            sub = _tree(path)
            if sub is not None:
                entries.append((entry.name + "/", b"40000", sub))
        else:
            mode = b"100755" if os.access(path, os.X_OK) else b"100644"
            entries.append((entry.name, mode, _object("blob", path.read_bytes())))
    if not entries:
        return None
    # git orders entries by name with directories compared as if they ended in "/".
    body = b"".join(mode + b" " + name.rstrip("/").encode() + b"\0" + oid
                    for name, mode, oid in sorted(entries, key=lambda e: e[0].encode()))
    return _object("tree", body)


def _object(kind: str, data: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data, usedforsecurity=False).digest()
