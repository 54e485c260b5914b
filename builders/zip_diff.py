"""Member-level explanation of the differences between two zip archives (wheels)."""
from __future__ import annotations

import struct
import zipfile
from pathlib import Path

from builders.diffutil import content_detail, difference, field_diffs, member_set_diffs

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")


def diff_zip(path_a: Path, path_b: Path) -> list[dict]:
    """Every difference between two zips: members, order, per-member metadata, raw headers."""
    raw_a, raw_b = path_a.read_bytes(), path_b.read_bytes()
    with zipfile.ZipFile(path_a) as za, zipfile.ZipFile(path_b) as zb:
        infos_a, infos_b = za.infolist(), zb.infolist()
        diffs = member_set_diffs([i.filename for i in infos_a], [i.filename for i in infos_b])
        if za.comment != zb.comment:
            diffs.append(difference(None, "header", f"archive comment {za.comment!r} -> {zb.comment!r}"))
        by_name_b = {i.filename: i for i in infos_b}
        for ia in infos_a:
            ib = by_name_b.get(ia.filename)
            if ib is not None:
                diffs += _member_diffs(za, zb, raw_a, raw_b, ia, ib)
    return diffs


def _member_diffs(za: zipfile.ZipFile, zb: zipfile.ZipFile, raw_a: bytes, raw_b: bytes,
                  ia: zipfile.ZipInfo, ib: zipfile.ZipInfo) -> list[dict]:
    name = ia.filename
    data_a, data_b = za.read(ia), zb.read(ib)
    diffs = []
    if data_a != data_b:
        diffs.append(difference(name, "content", content_detail(data_a, data_b)))
    if ia.date_time != ib.date_time:
        diffs.append(difference(name, "timestamp", f"date_time {_when(ia.date_time)} -> {_when(ib.date_time)}"))
    if ia.external_attr != ib.external_attr:
        diffs.append(difference(name, "mode", f"mode {_mode(ia)} -> {_mode(ib)} "
                                              f"(external_attr {ia.external_attr:#x} -> {ib.external_attr:#x})"))
    diffs += field_diffs(name, "header", [
        (f, getattr(ia, f), getattr(ib, f))
        for f in ("compress_type", "create_system", "create_version", "extract_version",
                  "flag_bits", "internal_attr", "volume", "extra", "comment")])
    stored_a, header_a = _stored(raw_a, ia)
    stored_b, header_b = _stored(raw_b, ib)
    if data_a == data_b and stored_a != stored_b:
        diffs.append(difference(name, "size", f"compressed data differs, {ia.compress_size} -> "
                                              f"{ib.compress_size} bytes; uncompressed content identical"))
    if not diffs and header_a != header_b:
        diffs.append(difference(name, "header", "local file header bytes differ "
                                                "(extra field or encoding) with equal central directory entries"))
    return diffs


def _stored(raw: bytes, info: zipfile.ZipInfo) -> tuple[bytes, bytes]:
    """(compressed data, local file header) of one member, read at its header offset."""
    off = info.header_offset
    fields = _LOCAL_HEADER.unpack_from(raw, off)
    name_len, extra_len = fields[9], fields[10]
    start = off + _LOCAL_HEADER.size + name_len + extra_len
    return raw[start:start + info.compress_size], raw[off:start]


def _when(dt: tuple) -> str:
    return "%04d-%02d-%02d %02d:%02d:%02d" % dt


def _mode(info: zipfile.ZipInfo) -> str:
    return oct((info.external_attr >> 16) & 0o7777)
