"""File-level checks of verify_release: what the manifest names, the signature over it, closure,
SHA256SUMS, SBOM markers and private markers (in records, and in artifacts member by member)."""
from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases import dsse, markers
from releases.canonical import load_json_bytes
from releases.errors import RecordError
from releases.release_dir import MANIFEST, MANIFEST_SIG
from releases.sums import files_to_sum, parse_sums
from releases.verify import artifact_scan
from releases.verify.checker import Checker

# Manifest fields that each bind one file (the rest are lists of entries).
_SINGLE_FILES = ("candidate_record", "sums", "ledger", "public_key", "approval", "signers")
_LIST_FILES = ("artifacts", "sboms", "receipts", "waivers", "notes")


def named_files(manifest: dict) -> dict[str, tuple[str, str]]:
    """rel path -> (manifest field, expected sha256) for every file the manifest binds."""
    named: dict[str, tuple[str, str]] = {}
    for key in _SINGLE_FILES:
        if key in manifest:
            named[manifest[key]["path"]] = (key, manifest[key]["sha256"])
    for key in _LIST_FILES:
        for i, entry in enumerate(manifest.get(key, [])):
            named[entry["path"]] = (f"{key}/{i}", entry["sha256"])
    return named


def check_unique_paths(check: Checker, manifest: dict, named: dict[str, tuple[str, str]]) -> None:
    total = sum(1 for k in _SINGLE_FILES if k in manifest)
    total += sum(len(manifest.get(k, [])) for k in _LIST_FILES)
    if total != len(named) or named.keys() & {MANIFEST, MANIFEST_SIG}:
        check.fail(MANIFEST, "", "the manifest names one path twice (or names manifest.json/manifest.sig)")


def check_manifest_sig(check: Checker, raw: bytes, key: Ed25519PublicKey) -> None:
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


def check_closure(check: Checker, manifest: dict, named: dict[str, tuple[str, str]]) -> None:
    allowed = set(named) | {MANIFEST, MANIFEST_SIG}
    for dirpath, dirnames, filenames in os.walk(check.root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            rel = (Path(dirpath) / name).relative_to(check.root).as_posix()
            check.counts["files"] += 1
            if rel not in allowed:
                check.fail(rel, "", "not named by the manifest")


def check_sums(check: Checker, manifest: dict) -> None:
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
        actual = check.sha256(rel)  # streamed, and already known for every file the manifest names
        if actual is not None and actual != sums[rel]:
            check.fail(rel, "sha256", f"digest differs from {entry['path']}")


_SBOM_MARKS = {"spdx-2.3": {"spdxVersion": "SPDX-2.3"},
               "cyclonedx-1.5": {"bomFormat": "CycloneDX", "specVersion": "1.5"}}


def check_sboms(check: Checker, manifest: dict) -> None:
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


def scan_markers(check: Checker, named: dict[str, tuple[str, str]]) -> None:
    """Private markers in every record and in every artifact's members (releases.verify.artifact_scan)."""
    for rel in sorted(set(named) | {MANIFEST, MANIFEST_SIG}):
        if rel.startswith("artifacts/"):
            if check.sha256(rel) is not None:  # a plain, readable file (its digest check reported any other)
                for where, what in artifact_scan.scan_artifact(check.root / rel, check.extra):
                    check.fail(rel, where, what)
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


def check_named_files(check: Checker, manifest: dict, named: dict[str, tuple[str, str]]) -> None:
    """Every file the manifest names has the digest it names; an artifact of another size than the
    manifest's is refused before a byte of it is read."""
    sizes = {a["path"]: a["size"] for a in manifest.get("artifacts", [])}
    for rel, (mfield, sha) in sorted(named.items()):
        check.check_digest(rel, sha, mfield, sizes.get(rel))
