"""Load a kernels artifact (engine.kernels.aot_build) as a read-only first layer of Triton's cache.

`install(artifact)` unpacks the artifact (its digest and every member's checked against the
index), applies the cache-invalidating environment it was compiled under (e.g.
TRITON_DISABLE_LINE_INFO) and makes AotCacheManager Triton's cache manager. Triton then asks
it, as it would its own file cache, for the entry of the key it computed for this launch: the
key covers the kernel source, the specialization, the target (the GPU's arch), the options, the
ptxas version and that environment. A shipped cubin is used exactly when Triton's own key
matches, and never otherwise: anything else misses and falls back to Triton's writable cache
(TRITON_CACHE_DIR), i.e. a JIT compile. Hits and compiles are counted per kernel for
/v1/engine/status.

Triton instantiates the manager class with nothing but the key, so the shipped tree and the
counters live on the class (one artifact per process).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import threading
from pathlib import Path
from typing import Dict, Optional

from triton import knobs
from triton.runtime.cache import CacheManager, FileCacheManager

from engine.kernels.aot_build import INDEX

_MEMBER = re.compile(r"^cache/([A-Z2-7]{52})/([A-Za-z0-9_]+\.(?:cubin|json))$")


class KernelsArtifactError(RuntimeError):
    """The kernels artifact cannot be used; names the file and what is wrong."""


class AotCacheManager(CacheManager):
    """Shipped entries first (read-only), then Triton's FileCacheManager (writable)."""

    root: Optional[Path] = None     # the unpacked artifact's cache/ directory
    kernels: frozenset = frozenset()
    artifact_sha256: Optional[str] = None
    hits: Dict[str, int] = {}
    compiles: Dict[str, int] = {}
    _lock = threading.Lock()

    def __init__(self, key, override=False, dump=False):
        self.key, self.override, self.dump = key, override, dump
        shipped = None if (override or dump or self.root is None) else self.root / key
        self.shipped = shipped if shipped is not None and shipped.is_dir() else None
        self._writable: Optional[FileCacheManager] = None

    @property
    def writable(self) -> FileCacheManager:
        if self._writable is None:
            self._writable = FileCacheManager(self.key, self.override, self.dump)
        return self._writable

    def get_file(self, filename) -> Optional[str]:
        if self.shipped is not None:
            p = self.shipped / filename
            return str(p) if p.is_file() else None
        return self.writable.get_file(filename)

    def get_group(self, filename: str) -> Optional[Dict[str, str]]:
        if self.shipped is None:
            return self.writable.get_group(filename)
        group = {p.name: str(p) for p in sorted(self.shipped.iterdir()) if p.is_file()}
        if filename not in group:
            return None
        self._count(self.hits, filename)
        return group

    def put(self, data, filename, binary=True) -> str:
        return self.writable.put(data, filename, binary)   # never into the shipped tree

    def put_group(self, filename: str, group: Dict[str, str]) -> str:
        self._count(self.compiles, filename)               # Triton writes a group only after compiling
        return self.writable.put_group(filename, group)

    @classmethod
    def _count(cls, table: Dict[str, int], filename: str) -> None:
        name = filename[:-len(".json")] if filename.endswith(".json") else filename
        with cls._lock:
            table[name] = table.get(name, 0) + 1


def install(artifact: str | Path | None, unpack_root: str | Path | None = None) -> dict:
    """Make AotCacheManager Triton's cache manager, over ARTIFACT's entries (None: count only).

    Call before the first kernel compiles. Returns the artifact's index (or {})."""
    index: dict = {}
    root = None
    sha = None
    if artifact is not None:
        artifact = Path(artifact)
        if not artifact.is_file():
            raise KernelsArtifactError(f"kernels artifact {artifact}: no such file")
        sha = hashlib.sha256(artifact.read_bytes()).hexdigest()
        base = Path(unpack_root) if unpack_root else Path(knobs.cache.dir).parent / "assay-aot"
        root, index = _unpack(artifact, base / sha)
        for name, value in index.get("env", {}).items():
            os.environ[name] = value    # the key hashes these; the artifact was compiled under them
    AotCacheManager.root = root
    AotCacheManager.artifact_sha256 = sha
    AotCacheManager.kernels = frozenset(e["kernel"] for e in index.get("entries", []))
    AotCacheManager.hits, AotCacheManager.compiles = {}, {}
    knobs.cache.manager_class = AotCacheManager
    return index


def status() -> dict:
    """{"source": "aot"|"jit"|"mixed"|"none", "artifact_sha256", "arch", "aot_hits", "jit_compiles", "per_kernel"}."""
    m = AotCacheManager
    with m._lock:
        hits, compiles = dict(m.hits), dict(m.compiles)
    if knobs.cache.manager_class is not AotCacheManager:
        hits, compiles = {}, {}
    if m.kernels:   # only the engine's own kernels; torch.compile's generated ones are not ours to ship
        compiles = {k: v for k, v in compiles.items() if k in m.kernels}
    n_hits, n_jit = sum(hits.values()), sum(compiles.values())
    source = "none" if not (n_hits or n_jit) else "aot" if not n_jit else "jit" if not n_hits else "mixed"
    per = {k: {"aot_hits": hits.get(k, 0), "jit_compiles": compiles.get(k, 0)} for k in sorted(set(hits) | set(compiles))}
    return {"source": source, "artifact_sha256": m.artifact_sha256, "arch": _arch(),
            "aot_hits": n_hits, "jit_compiles": n_jit, "per_kernel": per}


def _arch() -> Optional[str]:
    try:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - no CUDA runtime: no arch to report
        pass
    return None


def _unpack(artifact: Path, dest: Path) -> tuple[Path, dict]:
    """Members checked against the index, unpacked under DEST (one directory per artifact digest), read-only."""
    where = f"kernels artifact {artifact}"
    try:
        with tarfile.open(artifact) as tf:
            members = {}
            for info in tf.getmembers():
                if not info.isfile():
                    raise KernelsArtifactError(f"{where}: member {info.name!r} is not a plain file")
                if info.name != INDEX and not _MEMBER.match(info.name):
                    raise KernelsArtifactError(f"{where}: unexpected member {info.name!r}")
                members[info.name] = tf.extractfile(info).read()
    except (tarfile.TarError, OSError) as e:
        raise KernelsArtifactError(f"{where}: cannot be read ({e})") from None
    if INDEX not in members:
        raise KernelsArtifactError(f"{where}: no {INDEX}")
    try:
        index = json.loads(members.pop(INDEX))
    except ValueError as e:
        raise KernelsArtifactError(f"{where}: {INDEX} is not JSON ({e})") from None
    try:
        expected = {f"cache/{e['key']}/{n}": d for e in index["entries"] for n, d in e["files"].items()}
        env = {str(k): str(v) for k, v in index["env"].items()}
    except (KeyError, TypeError, AttributeError) as e:
        raise KernelsArtifactError(f"{where}: {INDEX} lacks entries/env/files/key ({e!r})") from None
    index["env"] = env
    if set(expected) != set(members):
        raise KernelsArtifactError(f"{where}: members and {INDEX} disagree: "
                                   f"{sorted(set(expected) ^ set(members))[:3]}")
    for name, data in members.items():
        if hashlib.sha256(data).hexdigest() != expected[name]:
            raise KernelsArtifactError(f"{where}: member {name} does not have the digest {INDEX} names")
    for name, data in members.items():   # what is already unpacked is used only if it has the digest
        p = dest / name
        if p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() == expected[name]:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.chmod(0o444)
        os.replace(tmp, p)
    return dest / "cache", index
