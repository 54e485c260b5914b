"""Whole-file writes and copies: a temp file in the same directory, fsynced, then renamed over the
target, so that no reader ever sees half a file."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    """No reader ever sees half a file. mkstemp creates the temp file 0600 and it gets `mode`
    only once written, so a private key is never readable by others, even briefly."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def copy_atomic(src: str | Path, dest: str | Path, mode: int = 0o644) -> None:
    """Copy SRC to DEST without holding it in memory; DEST appears whole or not at all."""
    dest = Path(dest)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
