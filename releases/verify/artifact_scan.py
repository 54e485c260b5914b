"""Private markers in shipped artifacts and their members: a wheel's and an sdist's files, or a bare file.

A text member is scanned line by line ("MEMBER line N"); a binary one through its printable runs of
six or more characters, as `strings` would show them ("MEMBER (binary)"). Every member is read as a
bounded stream: one larger than MAX_MEMBER_BYTES cannot be scanned and fails closed rather than
passing unread, and so does an archive that cannot be read.
"""
from __future__ import annotations

import re
import tarfile
import zipfile
from pathlib import Path
from typing import Iterable, Iterator

from releases import markers

MAX_MEMBER_BYTES = 64 << 20
_PRINTABLE = re.compile(rb"[\x20-\x7e\t]{6,}")


def scan_artifact(path: Path, extra: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(where, what) for every marker in the artifact at PATH: where names the member and line."""
    extra = tuple(extra)
    hits: list[tuple[str, str]] = []
    try:
        for member, data in _members(path):
            if data is None:
                hits.append((member, f"not scanned: larger than {MAX_MEMBER_BYTES} bytes"))
                continue
            hits += [(f"{member} {where}".strip(), f"private marker: {name}") for where, name in scan_bytes(data, extra)]
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
        hits.append(("", f"not scanned: the archive cannot be read ({exc})"))
    return hits


def scan_bytes(data: bytes, extra: tuple[str, ...]) -> list[tuple[str, str]]:
    """("line N" | "(binary)", marker name) in one file's bytes."""
    if b"\0" not in data[:8192]:
        try:
            return markers.scan_lines(data.decode("utf-8"), extra)
        except UnicodeDecodeError:
            pass
    text = "\n".join(m.decode("ascii") for m in _PRINTABLE.findall(data))
    return sorted({("(binary)", name) for name in markers.scan_text(text, extra)})


def _members(path: Path) -> Iterator[tuple[str, bytes | None]]:
    name = path.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                if info.file_size > MAX_MEMBER_BYTES:
                    yield info.filename, None
                    continue
                with zf.open(info) as fh:
                    yield info.filename, _bounded(fh)
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(path) as tf:
            for info in tf:
                if not info.isfile():
                    continue
                fh = tf.extractfile(info)
                if info.size > MAX_MEMBER_BYTES or fh is None:
                    yield info.name, None
                    continue
                yield info.name, _bounded(fh)
    else:
        if path.stat().st_size > MAX_MEMBER_BYTES:
            yield "", None
            return
        yield "", path.read_bytes()


def _bounded(fh) -> bytes | None:
    """At most MAX_MEMBER_BYTES: a header that lies about its size is still caught here."""
    data = fh.read(MAX_MEMBER_BYTES + 1)
    return None if len(data) > MAX_MEMBER_BYTES else data
