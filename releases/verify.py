"""Offline verification of a release directory: schemas, signatures, digest chain, closure, markers."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases import dsse, markers
from releases.canonical import canonical_json, load_json_bytes, sha256_hex
from releases.errors import Failure, KeyFileError, RecordError
from releases.keys import key_id, load_public_key
from releases.manifest import missing_for
from releases.release_dir import MANIFEST, MANIFEST_SIG, PUBLIC_KEY
from releases.schema import errors as schema_errors
from releases.sums import files_to_sum, parse_sums
from releases.verify_records import check_records

__all__ = ["VerificationReport", "verify_release", "Failure"]


@dataclass
class VerificationReport:
    ok: bool
    state: str | None
    failures: list[Failure]
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "state": self.state, "counts": self.counts, "failures": [asdict(f) for f in self.failures]}


class Checker:
    """Shared state of one verification run: the root, the failures found, the counts."""

    def __init__(self, root: Path, extra_markers: Iterable[str]) -> None:
        self.root = root
        self.failures: list[Failure] = []
        self.counts = {"files": 0, "digests": 0, "signatures": 0, "records": 0}
        self.extra = tuple(extra_markers)
        self._cache: dict[str, bytes | None] = {}

    def fail(self, file: str, fieldname: str, message: str) -> None:
        self.failures.append(Failure(file, fieldname, message))

    def read(self, rel: str, field_in_manifest: str = "") -> bytes | None:
        """Bytes of a file the manifest names, or None after recording why it cannot be read."""
        if rel in self._cache:
            return self._cache[rel]
        path = self.root / rel
        data = None
        if path.is_symlink():
            self.fail(rel, field_in_manifest, "is a symbolic link; a release holds plain files only")
        elif not path.resolve().is_relative_to(self.root.resolve()):
            self.fail(rel, field_in_manifest, "resolves outside the release directory")
        elif not path.is_file():
            self.fail(rel, field_in_manifest, "missing: named by the manifest but not in the directory")
        else:
            data = path.read_bytes()
        self._cache[rel] = data
        return data

    def json(self, rel: str, kind: str | None, field_in_manifest: str = "") -> Any:
        data = self.read(rel, field_in_manifest)
        if data is None:
            return None
        try:
            obj = load_json_bytes(data, where=rel)
        except RecordError as exc:
            self.fail(rel, "", exc.message)
            return None
        if kind is not None:
            errs = schema_errors(kind, obj)
            for err in errs:
                self.fail(rel, err.path or "/", f"{kind} schema: {err.message}")
            self.counts["records"] += 1
            if errs:
                return None
        return obj

    def check_digest(self, rel: str, expected: str, manifest_field: str) -> bytes | None:
        data = self.read(rel, manifest_field)
        if data is not None:
            self.counts["digests"] += 1
            actual = sha256_hex(data)
            if actual != expected:
                self.fail(rel, "sha256", f"digest {actual[:16]}... differs from manifest {manifest_field} {expected[:16]}...")
        return data


def named_files(manifest: dict) -> dict[str, tuple[str, str]]:
    """rel path -> (manifest field, expected sha256) for every file the manifest binds."""
    named: dict[str, tuple[str, str]] = {}
    for key in ("candidate_record", "sums", "ledger", "public_key", "approval"):
        if key in manifest:
            named[manifest[key]["path"]] = (key, manifest[key]["sha256"])
    for key in ("artifacts", "sboms", "receipts", "waivers", "notes"):
        for i, entry in enumerate(manifest.get(key, [])):
            named[entry["path"]] = (f"{key}/{i}", entry["sha256"])
    return named


def _check_unique_paths(check: Checker, manifest: dict, named: dict[str, tuple[str, str]]) -> None:
    total = sum(1 for k in ("candidate_record", "sums", "ledger", "public_key", "approval") if k in manifest)
    total += sum(len(manifest.get(k, [])) for k in ("artifacts", "sboms", "receipts", "waivers", "notes"))
    if total != len(named) or named.keys() & {MANIFEST, MANIFEST_SIG}:
        check.fail(MANIFEST, "", "the manifest names one path twice (or names manifest.json/manifest.sig)")


def _load_key(check: Checker, manifest: dict, given: Any) -> Ed25519PublicKey | None:
    entry = manifest.get("public_key")
    try:
        if given is not None:
            key = load_public_key(given)
        else:
            data = check.read(entry["path"] if entry else PUBLIC_KEY, "public_key")
            if data is None:
                return None
            key = load_public_key(data)
    except KeyFileError as exc:
        check.fail(entry["path"] if entry else PUBLIC_KEY, "", str(exc))
        return None
    if entry and entry["key_id"] != key_id(key):
        check.fail(MANIFEST, "public_key/key_id", f"manifest names key {entry['key_id'][:16]}..., verifying key is {key_id(key)[:16]}...")
    return key


def _check_manifest_sig(check: Checker, raw: bytes, key: Ed25519PublicKey) -> None:
    envelope = check.json(MANIFEST_SIG, "envelope", "manifest.sig")
    if envelope is None:
        return
    try:
        payload = dsse.verify(envelope, key, payload_type=dsse.MANIFEST_PAYLOAD_TYPE, where=MANIFEST_SIG)
    except RecordError as exc:
        check.fail(MANIFEST_SIG, "signatures", exc.message)
        return
    check.counts["signatures"] += 1
    if payload != raw:
        check.fail(MANIFEST, "", "bytes differ from the payload signed in manifest.sig")


def _check_closure(check: Checker, manifest: dict, named: dict[str, tuple[str, str]]) -> None:
    allowed = set(named) | {MANIFEST, MANIFEST_SIG}
    for dirpath, dirnames, filenames in os.walk(check.root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            rel = (Path(dirpath) / name).relative_to(check.root).as_posix()
            check.counts["files"] += 1
            if rel not in allowed:
                check.fail(rel, "", "not named by the manifest")


def _check_sums(check: Checker, manifest: dict) -> None:
    entry = manifest.get("sums")
    if not entry:
        return
    data = check.read(entry["path"], "sums")
    if data is None:
        return
    try:
        sums = parse_sums(data, entry["path"])
    except RecordError as exc:
        check.fail(entry["path"], "", exc.message)
        return
    present = set(files_to_sum(check.root))
    bound = {a["path"] for a in manifest.get("artifacts", [])} | {s["path"] for s in manifest.get("sboms", [])}
    for rel in sorted((present | bound) - set(sums)):
        check.fail(entry["path"], rel, "file under artifacts/ or sbom/ is missing from SHA256SUMS")
    for rel in sorted(set(sums) - present):
        check.fail(entry["path"], rel, "SHA256SUMS lists a file that is not in the directory")
    for rel in sorted(set(sums) & present):
        data = check.read(rel)
        if data is not None and sha256_hex(data) != sums[rel]:
            check.fail(rel, "sha256", f"digest differs from {entry['path']}")


_SBOM_MARKS = {"spdx-2.3": {"spdxVersion": "SPDX-2.3"}, "cyclonedx-1.5": {"bomFormat": "CycloneDX", "specVersion": "1.5"}}


def _check_sboms(check: Checker, manifest: dict) -> None:
    for sbom in manifest.get("sboms", []):
        doc = check.json(sbom["path"], None)
        if doc is None:
            continue
        if not isinstance(doc, dict):
            check.fail(sbom["path"], "", "SBOM is not a JSON object")
            continue
        for key, want in _SBOM_MARKS[sbom["format"]].items():
            if doc.get(key) != want:
                check.fail(sbom["path"], key, f"{doc.get(key)!r}, expected {want!r} for format {sbom['format']}")


def _scan_markers(check: Checker, named: dict[str, tuple[str, str]]) -> None:
    for rel in sorted(set(named) | {MANIFEST, MANIFEST_SIG}):
        if rel.startswith("artifacts/"):
            continue
        data = check.read(rel)
        if data is None:
            continue
        text = data.decode("utf-8", errors="replace")
        if rel.endswith(".json") or rel in (MANIFEST_SIG,):
            try:
                hits = markers.scan_json(load_json_bytes(data, where=rel), check.extra)
            except RecordError:
                hits = markers.scan_lines(text, check.extra)
        else:
            hits = markers.scan_lines(text, check.extra)
        for where, name in hits:
            check.fail(rel, where, f"private marker: {name}")


def verify_release(
    directory: str | Path,
    *,
    public_key: Any = None,
    require_ready: bool = False,
    private_markers: Iterable[str] = (),
) -> VerificationReport:
    """Verify `directory` offline; never raises for a bad release, reports every failure instead."""
    check = Checker(Path(directory), private_markers)
    if not check.root.is_dir():
        check.fail(str(directory), "", "not a directory")
        return VerificationReport(False, None, check.failures, check.counts)
    raw = check.read(MANIFEST, "manifest")
    manifest = check.json(MANIFEST, "manifest") if raw is not None else None
    if manifest is None:
        return VerificationReport(False, None, check.failures, check.counts)
    if canonical_json(manifest) != raw:
        check.fail(MANIFEST, "", "not canonical JSON (sorted keys, no whitespace)")
    for item in missing_for(manifest, manifest["state"]):
        check.fail(MANIFEST, "state", f"state {manifest['state']} lacks {item}")
    named = named_files(manifest)
    _check_unique_paths(check, manifest, named)
    key = _load_key(check, manifest, public_key)
    if key is not None:
        _check_manifest_sig(check, raw, key)
    for rel, (mfield, sha) in sorted(named.items()):
        check.check_digest(rel, sha, mfield)
    for i, art in enumerate(manifest.get("artifacts", [])):
        data = check.read(art["path"])
        if data is not None and len(data) != art["size"]:
            check.fail(art["path"], "size", f"{len(data)} bytes, manifest artifacts/{i}/size says {art['size']}")
    _check_closure(check, manifest, named)
    _check_sums(check, manifest)
    _check_sboms(check, manifest)
    if key is not None:
        check_records(check, manifest, key, require_ready=require_ready)
    if require_ready and manifest["state"] not in ("ready", "published"):
        check.fail(MANIFEST, "state", f"state is {manifest['state']}; ready or published required")
    _scan_markers(check, named)
    counts = dict(check.counts, artifacts=len(manifest.get("artifacts", [])), receipts=len(manifest.get("receipts", [])))
    return VerificationReport(not check.failures, manifest["state"], check.failures, counts)

