"""Activation: `current` is swapped atomically (a new symlink renamed over the old one), so that a
reader sees either the old release or the new one, never neither."""
from __future__ import annotations

import os

from releases.atomic import write_atomic
from releases.install.layout import Prefix


def swap_current(prefix: Prefix, version: str) -> None:
    tmp = prefix.root / f".current.{os.getpid()}"
    if os.path.lexists(tmp):
        tmp.unlink()
    os.symlink(f"releases/{version}", tmp)
    os.replace(tmp, prefix.current)


def write_previous(prefix: Prefix, version: str | None) -> None:
    if version is None:
        prefix.previous_file.unlink(missing_ok=True)
    else:
        write_atomic(prefix.previous_file, (version + "\n").encode("utf-8"))
