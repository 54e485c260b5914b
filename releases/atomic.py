"""Whole-file writes and copies: a temp file in the same directory, fsynced, then renamed over the
target, so that no reader ever sees half a file."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def _replace_atomic(path: Path, fill: Callable[[BinaryIO], None], mode: int) -> None:
    """mkstemp creates the temp file 0600 and it gets `mode` only once written, so a private key is
    never readable by others, even briefly."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Write DATA to PATH whole or not at all."""
    _replace_atomic(Path(path), lambda fh: fh.write(data), mode)


def copy_atomic(src: str | Path, dest: str | Path, mode: int = 0o644) -> None:
    """Copy SRC to DEST without holding it in memory; DEST appears whole or not at all."""
    def fill(fh: BinaryIO) -> None:
        with open(src, "rb") as inp:
            shutil.copyfileobj(inp, fh, 1 << 20)

    _replace_atomic(Path(dest), fill, mode)
