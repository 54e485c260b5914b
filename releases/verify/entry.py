"""verify_release: check a release directory offline and report every failure found."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from releases.canonical import canonical_json
from releases.errors import Failure
from releases.manifest import missing_for
from releases.release_dir import MANIFEST
from releases.notes import check_notes
from releases.verify import files
from releases.verify.checker import Checker
from releases.verify.records import check_records
from releases.verify.trust import EMBEDDED, resolve_key


@dataclass
class VerificationReport:
    ok: bool
    state: str | None
    failures: list[Failure]
    counts: dict[str, int] = field(default_factory=dict)
    key_id: str | None = None  # the key the signatures were checked with
    trust: str | None = None  # how that key came to be trusted (releases.verify.trust)
    warnings: list[str] = field(default_factory=list)
    version: str | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "state": self.state, "version": self.version, "counts": self.counts,
                "key_id": self.key_id, "trust": self.trust, "warnings": list(self.warnings),
                "failures": [asdict(f) for f in self.failures]}


def _check_expectations(check: Checker, manifest: dict, *, expected_commit: str | None,
                        expected_version: str | None, folder_name: str | None) -> None:
    if expected_commit is not None and manifest["candidate"]["commit"] != expected_commit.lower():
        check.fail(MANIFEST, "candidate/commit",
                   f"release is of commit {manifest['candidate']['commit']}, expected {expected_commit}")
    if expected_version is not None and manifest["version"] != expected_version:
        check.fail(MANIFEST, "version", f"release is version {manifest['version']}, expected {expected_version}")
    if folder_name is not None and manifest["version"] != folder_name:
        check.fail(MANIFEST, "version", f"release is version {manifest['version']} but its folder is named "
                                        f"{folder_name!r}; a store keeps each version under its own name")


def verify_release(
    directory: str | Path,
    *,
    public_key: Any = None,
    expected_key_id: str | Iterable[str] | None = None,
    trust_source: str = "",
    require_pinned_key: bool = False,
    require_ready: bool = False,
    require_signed_approval: bool = False,
    expected_commit: str | None = None,
    expected_version: str | None = None,
    check_folder_name: bool = False,
    private_markers: Iterable[str] = (),
) -> VerificationReport:
    """Verify `directory` offline; never raises for a bad release, reports every failure instead.

    The trust root: `public_key` (path, PEM or key object), else the release's own key when its id
    is in `expected_key_id`, else (with a warning, and a failure under `require_pinned_key`) the
    release's own key. `check_folder_name`: the manifest's version must be the folder's name."""
    root = Path(directory)
    check = Checker(root, private_markers)
    if not root.is_dir():
        check.fail(str(directory), "", "not a directory")
        return VerificationReport(False, None, check.failures, check.counts)
    if not (root / MANIFEST).exists() and any(root.iterdir()):
        # Whole objects and no commit point: a publish that stopped part-way. Not a release yet, and
        # not a broken one either: it is completed from the approved release it came from.
        check.fail(MANIFEST, "", "absent: this is an UNFINISHED PUBLISH (assets uploaded, the manifest, which is "
                                 "written last, not): recoverable, `assay publish --resume` (or a rerun of the "
                                 "release run) completes it from the approved release")
        return VerificationReport(False, "unfinished", check.failures, check.counts)
    raw = check.read(MANIFEST, "manifest")
    manifest = check.json(MANIFEST, "manifest") if raw is not None else None
    if manifest is None:
        return VerificationReport(False, None, check.failures, check.counts)
    if canonical_json(manifest) != raw:
        check.fail(MANIFEST, "", "not canonical JSON (RFC 8785)")
    for item in missing_for(manifest, manifest["state"]):
        check.fail(MANIFEST, "state", f"state {manifest['state']} lacks {item}")
    _check_expectations(check, manifest, expected_commit=expected_commit, expected_version=expected_version,
                        folder_name=root.resolve().name if check_folder_name else None)
    source = trust_source or ("--key" if public_key is not None else "expected key id" if expected_key_id else
                              "the release itself")
    trust = resolve_key(check, manifest, public_key=public_key, expected_key_id=expected_key_id,
                        trust_source=source, require_pinned=require_pinned_key)
    named = files.named_files(manifest)
    files.check_unique_paths(check, manifest, named)
    if trust.key is not None:
        files.check_manifest_sig(check, raw, trust.key)
    files.check_named_files(check, manifest, named)
    files.check_closure(check, manifest, named)
    files.check_sums(check, manifest)
    files.check_sboms(check, manifest)
    if trust.key is not None:
        check_records(check, manifest, trust.key, require_ready=require_ready,
                      require_signed_approval=require_signed_approval)
    if require_ready and manifest["state"] not in ("ready", "published"):
        check.fail(MANIFEST, "state", f"state is {manifest['state']}; ready or published required")
    if "notes" in manifest and not check.failures:  # notes render from intact records only
        check.failures.extend(check_notes(root, manifest))
    files.scan_markers(check, named)
    counts = dict(check.counts, artifacts=len(manifest.get("artifacts", [])),
                  receipts=len(manifest.get("receipts", [])))
    return VerificationReport(not check.failures, manifest["state"], check.failures, counts, trust.key_id,
                              trust.how if trust.key is not None else None, check.warnings, manifest["version"])


__all__ = ["VerificationReport", "verify_release", "Failure", "EMBEDDED"]
