"""Write a release directory (layout in docs/INTERFACES.md): atomic, canonical, validated files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from releases import dsse
from releases.atomic import copy_atomic, write_atomic
from releases.canonical import canonical_json, file_sha256, load_json_bytes, sha256_hex
from releases.errors import ImmutableRelease, RecordError
from releases.keys import key_id, public_pem
from releases.manifest import load_manifest, manifest_bytes
from releases.receipts import check_kind_label
from releases.schema import validate
from releases.sums import SUMS_NAME, compute_sums, format_sums

MANIFEST = "manifest.json"
MANIFEST_SIG = "manifest.sig"
PUBLIC_KEY = "keys/release.pub.pem"
CANDIDATE = "candidate.json"
LEDGER = "ledger.json"
SBOM_SUFFIX = {"spdx-2.3": ".spdx.json", "cyclonedx-1.5": ".cdx.json"}
# `docs`: a document users follow (e.g. QUICKSTART.md), shipped and summed so that verify can check
# its executable blocks against the ones an acceptance window ran. It is not built, so build and
# reproducibility receipts do not cover it.
ARTIFACT_KINDS = ("wheel", "sdist", "kernels", "docs")
BUILT_KINDS = ("wheel", "sdist", "kernels")


def write_bytes(path: str | Path, data: bytes) -> str:
    """Write atomically (releases.atomic), creating the parent directory; returns the sha256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
    return sha256_hex(data)


def write_json(path: str | Path, obj: Any, kind: str | None = None) -> str:
    """Validate (when `kind` is given), write canonical JSON atomically; return its sha256."""
    if kind is not None:
        validate(kind, obj, Path(path).name)
    return write_bytes(path, canonical_json(obj))


def read_json(path: str | Path, kind: str | None = None) -> Any:
    """Read a record strictly (no duplicate keys, no NaN) and validate it again when `kind` is given."""
    path = Path(path)
    obj = load_json_bytes(path.read_bytes(), where=path.name)
    return validate(kind, obj, path.name) if kind is not None else obj


def receipt_path(kind: str, label: str | None = None) -> str:
    """receipts/<kind>.dsse.json, or receipts/<kind>/<label>.dsse.json: a folder per kind, so that
    neither a kind nor a label containing '-' (verdict-abba, cpu-reference) can be misread, and a
    label's '/' segments (cpu-reference/context) become folders."""
    return f"receipts/{kind}/{label}.dsse.json" if label else f"receipts/{kind}.dsse.json"


class ReleaseDir:
    """Builds one release directory; each add_* returns the manifest entry for what it wrote."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _copy(self, src: str | Path, rel: str) -> dict:
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        copy_atomic(src, dest)
        return {"path": rel, "sha256": file_sha256(dest), "size": dest.stat().st_size}

    def add_candidate(self, record: dict) -> dict:
        return {"path": CANDIDATE, "sha256": write_json(self.root / CANDIDATE, record, "candidate")}

    def add_public_key(self, public_key: Ed25519PublicKey) -> dict:
        sha = write_bytes(self.root / PUBLIC_KEY, public_pem(public_key))
        return {"path": PUBLIC_KEY, "key_id": key_id(public_key), "sha256": sha}

    def add_artifact(self, src: str | Path, kind: str) -> dict:
        if kind not in ARTIFACT_KINDS:
            raise RecordError(f"artifact kind {kind!r} is not one of {', '.join(ARTIFACT_KINDS)}", where=str(Path(src).name))
        return {**self._copy(src, f"artifacts/{Path(src).name}"), "kind": kind}

    def add_sbom(self, src: str | Path, fmt: str) -> dict:
        name = Path(src).name
        if fmt not in SBOM_SUFFIX or not name.endswith(SBOM_SUFFIX[fmt]):
            raise RecordError(f"SBOM format {fmt!r} needs a name ending {SBOM_SUFFIX.get(fmt, '.spdx.json|.cdx.json')}",
                              where=name)
        entry = self._copy(src, f"sbom/{name}")
        return {"path": entry["path"], "sha256": entry["sha256"], "format": fmt}

    def write_sums(self) -> dict:
        """SHA256SUMS over every file now under artifacts/ and sbom/."""
        return {"path": SUMS_NAME, "sha256": write_bytes(self.root / SUMS_NAME, format_sums(compute_sums(self.root)))}

    def add_receipt(self, kind: str, envelope: dict, label: str | None = None) -> dict:
        check_kind_label(kind, label)
        rel = receipt_path(kind, label)
        validate("envelope", envelope, rel)
        return {"kind": kind, "label": label, "path": rel, "sha256": write_json(self.root / rel, envelope)}

    def add_ledger(self, record: dict) -> dict:
        return {"path": LEDGER, "sha256": write_json(self.root / LEDGER, record, "ledger")}

    def add_waiver(self, record: dict) -> dict:
        rel = f"waivers/{record.get('id')}.json"
        return {"id": record.get("id"), "path": rel, "sha256": write_json(self.root / rel, record, "waiver")}

    def add_approval(self, envelope: dict, approval: dict, manifest_sha256: str) -> dict:
        """The manifest's `approval` entry for a signed approval receipt."""
        validate("approval", approval, "approval")
        sha = write_json(self.root / receipt_path("approval"), validate("envelope", envelope, "approval"))
        return {"path": receipt_path("approval"), "sha256": sha, "manifest_sha256": manifest_sha256,
                "decision": approval["decision"], "approver": approval["approver"]}

    def write_manifest(self, manifest: dict, private_key: Ed25519PrivateKey) -> str:
        """Sign into manifest.sig, then write manifest.json (last: it is the commit point)."""
        current = self.root / MANIFEST
        if current.exists():
            try:
                state = load_manifest(current.read_bytes()).get("state")
            except RecordError:
                state = None
            if state == "published":
                raise ImmutableRelease(f"{current.name} in this directory is published; it cannot be rewritten")
        data = manifest_bytes(manifest)
        write_json(self.root / MANIFEST_SIG, dsse.sign(data, dsse.MANIFEST_PAYLOAD_TYPE, private_key))
        return write_bytes(current, data)
