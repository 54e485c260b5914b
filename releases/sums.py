"""SHA256SUMS: "<sha256>  <path>" per line, sorted by path, LF line ends."""
from __future__ import annotations

import re
from pathlib import Path

from releases.canonical import file_sha256
from releases.errors import RecordError

SUMS_NAME = "SHA256SUMS"
SUMMED_DIRS = ("artifacts", "sbom")
_LINE = re.compile(r"^([0-9a-f]{64})  ([^\s/][^\n\r]*)$")


def format_sums(entries: dict[str, str]) -> bytes:
    lines = []
    for path in sorted(entries):
        sha = entries[path]
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise RecordError(f"not a sha256 hex digest: {sha!r}", where=path)
        if "\n" in path or path.startswith("/") or ".." in path.split("/"):
            raise RecordError("path must be relative, one line, without '..'", where=path)
        lines.append(f"{sha}  {path}\n")
    return "".join(lines).encode("utf-8")


def parse_sums(data: bytes, where: str = SUMS_NAME) -> dict[str, str]:
    """Parse strictly: any malformed, unsorted or duplicate line is a RecordError naming its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"not UTF-8: {exc}", where=where) from exc
    if text and not text.endswith("\n"):
        raise RecordError("last line does not end with LF", where=where)
    entries: dict[str, str] = {}
    previous = ""
    for number, line in enumerate(text.split("\n")[:-1], start=1):
        match = _LINE.match(line)
        if not match:
            raise RecordError(f"line {number} is not '<sha256>  <path>'", where=where)
        sha, path = match.groups()
        if path in entries:
            raise RecordError(f"line {number}: duplicate path {path}", where=where)
        if path < previous:
            raise RecordError(f"line {number}: not sorted ({path} after {previous})", where=where)
        entries[path] = sha
        previous = path
    return entries


def files_to_sum(directory: str | Path) -> list[str]:
    """Relative paths of every file under artifacts/ and sbom/."""
    root = Path(directory)
    found = []
    for sub in SUMMED_DIRS:
        base = root / sub
        if base.is_dir():
            found += [p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file() or p.is_symlink()]
    return sorted(found)


def compute_sums(directory: str | Path) -> dict[str, str]:
    root = Path(directory)
    return {rel: file_sha256(root / rel) for rel in files_to_sum(root)}
