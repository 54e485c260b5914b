"""Member-level explanation of the differences between two gzip-compressed tar archives (sdists)."""
from __future__ import annotations

import gzip
import hashlib
import io
import struct
import tarfile
from pathlib import Path

from builders.diffutil import content_detail, difference, field_diffs, member_set_diffs
from builders.errors import CompareError

_BLOCK = 512
# Fields of a pax header that the per-member comparison already reports on its own.
_PAX_COVERED = {"mtime", "atime", "ctime", "size", "path", "linkpath", "uid", "gid", "uname", "gname"}
_GZIP_FLAGS = {"FTEXT": 1, "FHCRC": 2, "FEXTRA": 4, "FNAME": 8, "FCOMMENT": 16}


def diff_targz(path_a: Path, path_b: Path) -> list[dict]:
    raw_a, raw_b = path_a.read_bytes(), path_b.read_bytes()
    diffs = field_diffs(None, "header", [(f"gzip {k}", va, vb) for k, va, vb in
                                        _zip_fields(gzip_header(raw_a), gzip_header(raw_b))])
    try:
        tar_a, tar_b = gzip.decompress(raw_a), gzip.decompress(raw_b)
    except (OSError, EOFError) as exc:
        raise CompareError(f"not a readable gzip stream: {exc}") from exc
    if tar_a == tar_b:
        if not diffs:
            diffs.append(difference(None, "size", f"compressed stream differs, {len(raw_a)} -> "
                                                  f"{len(raw_b)} bytes; the tar inside is identical"))
        return diffs
    return diffs + diff_tar(tar_a, tar_b)


def gzip_header(raw: bytes) -> dict:
    """The fields of a gzip member header (RFC 1952) that a compressor may vary."""
    if len(raw) < 10 or raw[:2] != b"\x1f\x8b":
        raise CompareError("not a gzip stream (bad magic)")
    method, flags, mtime, xfl, os_ = struct.unpack_from("<BBIBB", raw, 2)
    header = {"method": method, "flags": [k for k, v in _GZIP_FLAGS.items() if flags & v],
              "mtime": mtime, "xfl": xfl, "os": os_, "extra": None, "name": None, "comment": None}
    pos = 10
    if flags & 4:
        (xlen,) = struct.unpack_from("<H", raw, pos)
        header["extra"] = raw[pos + 2:pos + 2 + xlen].hex()
        pos += 2 + xlen
    for key, bit in (("name", 8), ("comment", 16)):
        if flags & bit:
            end = raw.index(b"\0", pos)
            header[key] = raw[pos:end].decode("latin-1")
            pos = end + 1
    return header


def diff_tar(tar_a: bytes, tar_b: bytes) -> list[dict]:
    with _open(tar_a) as ta, _open(tar_b) as tb:
        ma, mb = ta.getmembers(), tb.getmembers()
        diffs = member_set_diffs([m.name for m in ma], [m.name for m in mb])
        diffs += field_diffs(None, "header", [("global pax headers", ta.pax_headers, tb.pax_headers)])
        by_name_b = {m.name: m for m in mb}
        for a in ma:
            b = by_name_b.get(a.name)
            if b is not None:
                diffs += _member_diffs(ta, tb, tar_a, tar_b, a, b)
        tail_a, tail_b = tar_a[_end(ma):], tar_b[_end(mb):]
        # Zero padding up to the record size follows from the members' sizes; it is a
        # difference of its own only when it carries data or nothing else differs.
        padding_only = not tail_a.strip(b"\0") and not tail_b.strip(b"\0")
        if tail_a != tail_b and not (padding_only and diffs):
            diffs.append(difference(None, "header", f"end-of-archive blocks differ, {len(tail_a)} -> "
                                                    f"{len(tail_b)} bytes after the last member"))
    return diffs


def _member_diffs(ta, tb, raw_a: bytes, raw_b: bytes, a: tarfile.TarInfo, b: tarfile.TarInfo) -> list[dict]:
    name = a.name
    diffs = []
    if a.type != b.type:
        diffs.append(difference(name, "content", f"member type {a.type!r} -> {b.type!r}"))
    elif a.isfile():
        data_a, data_b = ta.extractfile(a).read(), tb.extractfile(b).read()
        if data_a != data_b:
            diffs.append(difference(name, "content", content_detail(data_a, data_b)))
    elif a.linkname != b.linkname:
        diffs.append(difference(name, "content", f"link target sha256 {_h(a.linkname)} -> {_h(b.linkname)}"))
    if a.mtime != b.mtime:
        diffs.append(difference(name, "timestamp", f"mtime {a.mtime} -> {b.mtime}"))
    if a.mode != b.mode:
        diffs.append(difference(name, "mode", f"mode {oct(a.mode)} -> {oct(b.mode)}"))
    pax_a = {k: v for k, v in a.pax_headers.items() if k not in _PAX_COVERED}
    pax_b = {k: v for k, v in b.pax_headers.items() if k not in _PAX_COVERED}
    diffs += field_diffs(name, "header", [
        ("uid", a.uid, b.uid), ("gid", a.gid, b.gid), ("uname", a.uname, b.uname),
        ("gname", a.gname, b.gname), ("devmajor", a.devmajor, b.devmajor),
        ("devminor", a.devminor, b.devminor), ("pax headers", pax_a, pax_b)])
    if not diffs and raw_a[a.offset:a.offset_data] != raw_b[b.offset:b.offset_data]:
        diffs.append(difference(name, "header", "raw tar header blocks differ with equal parsed "
                                                "fields (tar format or field encoding)"))
    return diffs


def _open(data: bytes) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=io.BytesIO(data), mode="r:")
    except tarfile.TarError as exc:
        raise CompareError(f"not a readable tar archive: {exc}") from exc


def _end(members: list[tarfile.TarInfo]) -> int:
    if not members:
        return 0
    last = members[-1]
    size = last.size if last.isfile() else 0
    return last.offset_data + -(-size // _BLOCK) * _BLOCK


def _zip_fields(ha: dict, hb: dict):
    return [(k, ha[k], hb[k]) for k in ha]


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
