"""Structural validation of a GGUF file before any of it is trusted.

gguf.GGUFReader assumes a well-formed file; a flipped byte or a truncated download makes it
fail deep inside numpy, or read garbage. This walks the header with bounds checks on every
read and checks each tensor's extent against the file size, so bad input gets a GGUFError
that names the file and the field.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from engine.gguf_import.errors import GGUFError

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
# Fixed-size value types: GGUF type code -> (struct format, size).
_SCALARS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
            6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class TensorExtent:
    name: str
    type_name: str
    shape: tuple[int, ...]        # GGUF order: fastest-varying dimension first
    offset: int                   # absolute offset in the file
    nbytes: int


@dataclass(frozen=True)
class HeaderSummary:
    version: int
    tensor_count: int
    kv_count: int
    alignment: int
    data_offset: int
    file_size: int
    tensors: tuple[TensorExtent, ...]


class _Cursor:
    def __init__(self, path: str, buf, size: int):
        self.path, self.buf, self.size, self.pos = path, buf, size, 0

    def take(self, n: int, what: str) -> int:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(self.path, f"truncated or corrupt header: {what} needs {n} bytes at offset "
                                       f"{self.pos}, but the file has {self.size} bytes")
        start = self.pos
        self.pos += n
        return start

    def scalar(self, fmt: str, size: int, what: str):
        return struct.unpack_from(fmt, self.buf, self.take(size, what))[0]

    def u32(self, what: str) -> int:
        return self.scalar("<I", 4, what)

    def u64(self, what: str) -> int:
        return self.scalar("<Q", 8, what)

    def string(self, what: str) -> str:
        n = self.u64(f"length of {what}")
        start = self.take(n, what)
        try:
            return bytes(self.buf[start:start + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise GGUFError(self.path, f"{what} at offset {start} is not valid UTF-8 ({e.reason})") from None


def _skip_value(cur: _Cursor, vtype: int, key: str, depth: int = 0):
    """Reads (and bounds-checks) one value; returns it only for scalars and strings."""
    if vtype in _SCALARS:
        fmt, size = _SCALARS[vtype]
        return cur.scalar(fmt, size, f"value of {key!r}")
    if vtype == _STRING:
        return cur.string(f"value of {key!r}")
    if vtype == _ARRAY and depth < 2:
        etype = cur.u32(f"element type of {key!r}")
        count = cur.u64(f"element count of {key!r}")
        if etype in _SCALARS:
            cur.take(count * _SCALARS[etype][1], f"array {key!r} of {count} elements")
            return None
        if etype not in (_STRING, _ARRAY):
            raise GGUFError(cur.path, f"array {key!r} has unknown element type {etype}")
        min_size = 8 if etype == _STRING else 12
        if count * min_size > cur.size - cur.pos:
            raise GGUFError(cur.path, f"array {key!r} claims {count} elements, more than the "
                                      f"{cur.size - cur.pos} bytes left in the file could hold")
        for i in range(count):
            _skip_value(cur, etype, f"{key}[{i}]", depth + 1)
        return None
    raise GGUFError(cur.path, f"metadata {key!r} has unknown value type {vtype} at offset {cur.pos - 4}")


def validate_gguf(path: str | Path) -> HeaderSummary:
    """Checks magic, version, counts, metadata, tensor infos, offsets and sizes; raises GGUFError."""
    path = str(path)
    try:
        with open(path, "rb") as f:
            size = Path(path).stat().st_size
            if size < 24:
                raise GGUFError(path, f"file is {size} bytes, too short for a GGUF header (24 bytes)")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _walk(_Cursor(path, buf, size))
    except OSError as e:
        raise GGUFError(path, f"cannot read the file: {e.strerror or e}") from None


def _walk(cur: _Cursor) -> HeaderSummary:
    path = cur.path
    magic = bytes(cur.buf[0:4])
    cur.take(4, "magic")
    if magic != MAGIC:
        raise GGUFError(path, f"bad magic {magic!r} at offset 0 (expected {MAGIC!r}): not a GGUF file")
    version = cur.u32("version")
    if version not in VERSIONS:
        raise GGUFError(path, f"unsupported GGUF version {version} at offset 4 (supported: {VERSIONS})")
    tensor_count = cur.u64("tensor count")
    kv_count = cur.u64("metadata count")
    # Each tensor info takes at least 8+4+8+4+8 bytes and each key/value at least 8+4+1.
    if tensor_count * 32 > cur.size:
        raise GGUFError(path, f"tensor count {tensor_count} at offset 8 is impossible for a file of {cur.size} bytes")
    if kv_count * 13 > cur.size:
        raise GGUFError(path, f"metadata count {kv_count} at offset 16 is impossible for a file of {cur.size} bytes")
    alignment = DEFAULT_ALIGNMENT
    seen_keys: set[str] = set()
    for i in range(kv_count):
        key = cur.string(f"key of metadata entry {i}")
        if key in seen_keys:
            raise GGUFError(path, f"metadata key {key!r} appears twice")
        seen_keys.add(key)
        value = _skip_value(cur, cur.u32(f"type of {key!r}"), key)
        if key == "general.alignment":
            if not isinstance(value, int) or value <= 0 or value & (value - 1):
                raise GGUFError(path, f"general.alignment {value!r} is not a positive power of two")
            alignment = value
    infos = []
    names: set[str] = set()
    for i in range(tensor_count):
        name = cur.string(f"name of tensor {i}")
        if name in names:
            raise GGUFError(path, f"tensor {name!r} appears twice")
        names.add(name)
        n_dims = cur.u32(f"dimension count of tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(path, f"tensor {name!r} has {n_dims} dimensions (expected 1..{MAX_DIMS})")
        shape = tuple(cur.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims))
        type_code = cur.u32(f"type of tensor {name!r}")
        offset = cur.u64(f"data offset of tensor {name!r}")
        infos.append((name, shape, type_code, offset))
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = tuple(_check_tensor(path, alignment, data_offset, cur.size, *info) for info in infos)
    _check_overlaps(path, tensors)
    return HeaderSummary(version, tensor_count, kv_count, alignment, data_offset, cur.size, tensors)


def _check_tensor(path, alignment, data_offset, size, name, shape, type_code, offset) -> TensorExtent:
    try:
        qtype = GGMLQuantizationType(type_code)
        block, type_size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise GGUFError(path, f"tensor {name!r} has unknown type code {type_code}") from None
    if any(d == 0 or d > 1 << 40 for d in shape):
        raise GGUFError(path, f"tensor {name!r} has an impossible shape {list(shape)}")
    if shape[0] % block:
        raise GGUFError(path, f"tensor {name!r}: first dimension {shape[0]} is not a multiple of the "
                              f"{qtype.name} block size {block}")
    count = 1
    for d in shape:
        count *= d
    nbytes = count // block * type_size
    if offset % alignment:
        raise GGUFError(path, f"tensor {name!r}: data offset {offset} is not aligned to {alignment}")
    start = data_offset + offset
    if start + nbytes > size:
        raise GGUFError(path, f"tensor {name!r} ({qtype.name}, {list(shape)}) needs bytes {start}..{start + nbytes} "
                              f"but the file has {size} bytes: truncated or corrupt")
    return TensorExtent(name, qtype.name, shape, start, nbytes)


def _check_overlaps(path: str, tensors: tuple[TensorExtent, ...]) -> None:
    ordered = sorted(tensors, key=lambda t: t.offset)
    for a, b in zip(ordered, ordered[1:]):
        if a.offset + a.nbytes > b.offset:
            raise GGUFError(path, f"tensors {a.name!r} and {b.name!r} overlap in the data section")
