"""Durable session checkpoints: KV tensors + token ids + the identity they were computed under.

Layout under the checkpoint directory (one folder per session, named by the sha256 of its key):

    <sha256(session)>/current                  name of the live generation (atomic rename)
    <sha256(session)>/<generation>/tensors.safetensors
    <sha256(session)>/<generation>/tokens.json
    <sha256(session)>/<generation>/manifest.json   written last; digests of the two files above

A checkpoint is `available`, `missing`, `incompatible` (another identity or origin key) or
`corrupt` (anything that does not verify). Only an available one is ever restored, and only
into the session it was saved from: `current` must name a generation folder directly inside
the session's own folder, and the manifest must name that session.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.digests import canonical_json, file_sha256

FORMAT = "assay-engine-checkpoint/v1"
_ORIGIN_CONTEXT = b"assay-engine/checkpoint-origin/v1"
_FILES = ("tensors.safetensors", "tokens.json")
# What save() names a generation: no separator, no "..", nothing that leaves the session folder.
_GENERATION = re.compile(r"g[0-9]{20}-[0-9a-f]{8}")


class CheckpointError(Exception):
    pass


class CheckpointQuotaExceeded(CheckpointError):
    pass


@dataclass
class CheckpointInfo:
    status: str                              # available | missing | incompatible | corrupt
    reason: str = ""
    manifest: dict[str, Any] | None = None
    generation: str | None = None            # the folder `current` named, once it verified

    def public(self, session: str) -> dict[str, Any]:
        m = self.manifest or {}
        return {"session": session, "status": self.status, "reason": self.reason or None,
                "tokens": m.get("token_count"), "bytes": m.get("bytes"),
                "created_at": m.get("created_at")}


@dataclass
class LoadedCheckpoint:
    token_ids: list[int]
    tensors: dict[str, Any] = field(default_factory=dict)


def origin_key(api_key: str) -> bytes:
    """The MAC key: derived from the API key so the raw key never touches the disk."""
    return hmac.new(api_key.encode("utf-8"), _ORIGIN_CONTEXT, hashlib.sha256).digest()


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointStore:
    def __init__(self, directory: str | Path, identity: dict[str, str], quota_bytes: int,
                 origin_auth_key: bytes | None = None):
        self.root = Path(directory)
        self.root.mkdir(parents=True, exist_ok=True)
        self.identity = dict(identity)
        self.quota_bytes = int(quota_bytes)
        self.key = origin_auth_key
        self.key_id = hashlib.sha256(origin_auth_key).hexdigest()[:16] if origin_auth_key else None
        self._lock = threading.Lock()

    def session_dir(self, session: str) -> Path:
        """Where a session's checkpoints live: a folder named by the sha256 of its key."""
        return self.root / hashlib.sha256(session.encode("utf-8")).hexdigest()

    def _mac(self, manifest: dict[str, Any]) -> str:
        body = {k: v for k, v in manifest.items() if k != "origin"}
        body["origin_key_id"] = manifest["origin"]["key_id"]
        return hmac.new(self.key, canonical_json(body), hashlib.sha256).hexdigest()

    def save(self, session: str, token_ids: list[int], tensors: dict[str, Any]) -> dict[str, Any]:
        """Write a new generation, manifest last, then swap `current`; returns the manifest."""
        from safetensors.torch import save_file
        sdir = self.session_dir(session)
        gen = f"g{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        gdir = sdir / gen
        with self._lock:
            gdir.mkdir(parents=True)
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()},
                      str(gdir / "tensors.safetensors"))
            _write_synced(gdir / "tokens.json", canonical_json([int(t) for t in token_ids]))
            files = {name: file_sha256(gdir / name) for name in _FILES}
            size = sum((gdir / name).stat().st_size for name in _FILES)
            manifest: dict[str, Any] = {
                "format": FORMAT, "session_sha256": sdir.name, "identity": self.identity,
                "token_count": len(token_ids), "files": files, "bytes": size,
                "created_at": round(time.time(), 6), "origin": None}
            if self.key is not None:
                manifest["origin"] = {"key_id": self.key_id, "hmac": ""}
                manifest["origin"]["hmac"] = self._mac(manifest)
            _write_synced(gdir / "manifest.json", canonical_json(manifest))
            _fsync_dir(gdir)
            tmp = sdir / f"current.{gen}.tmp"
            _write_synced(tmp, gen.encode("ascii"))
            os.replace(tmp, sdir / "current")
            _fsync_dir(sdir)
            for old in sdir.iterdir():
                if old.is_dir() and old.name != gen:
                    shutil.rmtree(old, ignore_errors=True)
            self._enforce_quota(keep=sdir)
        return manifest

    def _enforce_quota(self, keep: Path) -> None:
        sizes = {d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
                 for d in self.root.iterdir() if d.is_dir()}
        total = sum(sizes.values())
        if sizes.get(keep, 0) > self.quota_bytes:
            shutil.rmtree(keep, ignore_errors=True)
            raise CheckpointQuotaExceeded(
                f"checkpoint of {sizes[keep]} bytes exceeds the quota of {self.quota_bytes} bytes")
        by_age = sorted((d for d in sizes if d != keep), key=lambda d: d.stat().st_mtime)
        for d in by_age:
            if total <= self.quota_bytes:
                break
            shutil.rmtree(d, ignore_errors=True)
            total -= sizes[d]

    def inspect(self, session: str) -> CheckpointInfo:
        sdir = self.session_dir(session)
        cur = sdir / "current"
        if not cur.exists():
            return CheckpointInfo("missing")
        try:
            gen = cur.read_text(encoding="ascii").strip()
        except (OSError, ValueError) as e:
            return CheckpointInfo("corrupt", f"current unreadable: {type(e).__name__}")
        gdir = sdir / gen
        # `current` is data read from disk: it may only name a generation of this session.
        if (not _GENERATION.fullmatch(gen) or gdir.is_symlink()
                or gdir.resolve().parent != sdir.resolve()):
            return CheckpointInfo("corrupt", "current does not name a generation of this "
                                  "session")
        try:
            manifest = json.loads((gdir / "manifest.json").read_bytes())
        except (OSError, ValueError) as e:
            return CheckpointInfo("corrupt", f"manifest unreadable: {type(e).__name__}")
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            return CheckpointInfo("incompatible", "unknown checkpoint format")
        origin = manifest.get("origin")
        if self.key is not None:
            if not isinstance(origin, dict) or origin.get("key_id") != self.key_id:
                return CheckpointInfo("incompatible", "saved under another origin key", manifest)
            if not hmac.compare_digest(str(origin.get("hmac", "")), self._mac(manifest)):
                return CheckpointInfo("corrupt", "manifest authentication failed", manifest)
        if manifest.get("session_sha256") != sdir.name:
            return CheckpointInfo("corrupt", "manifest belongs to another session", manifest)
        if manifest.get("identity") != self.identity:
            diff = sorted(k for k in set(self.identity) | set(manifest.get("identity") or {})
                          if (manifest.get("identity") or {}).get(k) != self.identity.get(k))
            return CheckpointInfo("incompatible", "identity differs: " + ", ".join(diff), manifest)
        for name, digest in (manifest.get("files") or {}).items():
            p = gdir / name
            if name not in _FILES or not p.is_file() or file_sha256(p) != digest:
                return CheckpointInfo("corrupt", f"{name} does not match its digest", manifest)
        if set(manifest.get("files") or {}) != set(_FILES):
            return CheckpointInfo("corrupt", "manifest lists the wrong files", manifest)
        return CheckpointInfo("available", "", manifest, gen)

    def load(self, session: str) -> tuple[CheckpointInfo, LoadedCheckpoint | None]:
        """Verify, then read; anything that fails to read makes the checkpoint corrupt."""
        from safetensors.torch import load_file
        info = self.inspect(session)
        if info.status != "available":
            return info, None
        # the generation inspect() verified, not a second read of `current`, which may have
        # been replaced meanwhile
        gdir = self.session_dir(session) / info.generation
        try:
            tokens = json.loads((gdir / "tokens.json").read_bytes())
            tensors = load_file(str(gdir / "tensors.safetensors"))
        except Exception as e:  # a verified file that still fails to parse is corrupt
            return CheckpointInfo("corrupt", f"unreadable: {type(e).__name__}", info.manifest), None
        if not isinstance(tokens, list) or len(tokens) != info.manifest.get("token_count"):
            return CheckpointInfo("corrupt", "token count mismatch", info.manifest), None
        return info, LoadedCheckpoint(token_ids=[int(t) for t in tokens], tensors=tensors)

    def delete(self, session: str) -> bool:
        sdir = self.session_dir(session)
        with self._lock:
            if not sdir.exists():
                return False
            shutil.rmtree(sdir)
            return True

    def total_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file())
