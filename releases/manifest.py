"""Manifest state machine: draft -> candidate -> ready -> published (then immutable)."""
from __future__ import annotations

import copy
from typing import Any

from releases.canonical import canonical_json, digest, load_json_bytes
from releases.errors import ImmutableRelease, RecordError
from releases.schema import validate

MANIFEST_SCHEMA = "assay/manifest/v1"
STATES = ("draft", "candidate", "ready", "published")
_NEXT = {"draft": "candidate", "candidate": "ready", "ready": "published"}
_IDENTITY = ("manifest_schema", "version", "candidate", "state", "approval", "notes")
# Set only by the move to published, and left out of what an approval binds: the approval is
# given on the ready manifest, and the notes are rendered from the records once it is given.
_AT_PUBLISH = ("approval", "notes")


def new_manifest(version: str, candidate: dict) -> dict:
    """A draft manifest for `version` of the candidate named by `candidate` (a candidate ref)."""
    manifest = {"manifest_schema": MANIFEST_SCHEMA, "state": "draft", "version": version, "candidate": dict(candidate)}
    return validate("manifest", manifest, "manifest.json")


def _receipt_keys(manifest: dict) -> set[tuple[str, Any]]:
    return {(r.get("kind"), r.get("label")) for r in manifest.get("receipts", [])}


def missing_for(manifest: dict, state: str) -> list[str]:
    """What `manifest` lacks to be in `state` (empty when nothing); mirrors the schema's if/then."""
    if state not in STATES:
        raise RecordError(f"unknown manifest state {state!r}; states: {', '.join(STATES)}")
    level = STATES.index(state)
    missing: list[str] = []
    receipts = _receipt_keys(manifest)
    kinds = {k for k, _ in receipts}
    if level >= 1:
        missing += [k for k in ("candidate_record", "public_key") if k not in manifest]
        if "candidate" not in kinds:
            missing.append("receipts: candidate")
    if level >= 2:
        missing += [k for k in ("sums", "ledger", "waivers") if k not in manifest]
        art_kinds = {a.get("kind") for a in manifest.get("artifacts", [])}
        missing += [f"artifacts: {k}" for k in ("wheel", "sdist") if k not in art_kinds]
        formats = {s.get("format") for s in manifest.get("sboms", [])}
        missing += [f"sboms: {f}" for f in ("spdx-2.3", "cyclonedx-1.5") if f not in formats]
        missing += [f"receipts: build-{b}" for b in ("a", "b") if ("build", b) not in receipts]
        missing += [f"receipts: {k}" for k in ("reproducibility", "lane") if k not in kinds]
    if level >= 3:
        approval = manifest.get("approval")
        if not approval:
            missing.append("approval")
        elif approval.get("decision") != "approve":
            missing.append("approval: decision approve")
    return missing


def update(manifest: dict, **fields: Any) -> dict:
    """A copy of `manifest` with `fields` set; identity, state and approval change only by transition."""
    if manifest.get("state") == "published":
        raise ImmutableRelease(f"manifest of {manifest.get('version')} is published; it cannot be edited")
    fixed = sorted(set(fields) & set(_IDENTITY))
    if fixed:
        raise RecordError(f"cannot edit {', '.join(fixed)} with update(); use transition() or a new manifest", where="manifest.json")
    out = copy.deepcopy(manifest)
    out.update(copy.deepcopy(fields))
    return validate("manifest", out, "manifest.json")


def approval_digest(manifest: dict) -> str:
    """The digest an approval binds: the manifest as it stood when ready (no approval, state ready)."""
    ready = {k: v for k, v in manifest.items() if k not in _AT_PUBLISH}
    ready["state"] = "ready"
    return digest(ready)


def transition(manifest: dict, to_state: str, **fields: Any) -> dict:
    """Advance one state, setting `fields`; refuse illegal moves and anything the target lacks."""
    state = manifest.get("state")
    if state == "published":
        raise ImmutableRelease(f"manifest of {manifest.get('version')} is published; no transition leaves it")
    if _NEXT.get(state) != to_state:
        raise ImmutableRelease(f"illegal manifest transition {state} -> {to_state}; next allowed: {_NEXT.get(state)}")
    bad = sorted(set(fields) & {"manifest_schema", "version", "candidate", "state"})
    if bad:
        raise RecordError(f"a transition cannot change {', '.join(bad)}", where="manifest.json")
    early = sorted(set(fields) & set(_AT_PUBLISH)) if to_state != "published" else []
    if early:
        raise RecordError(f"{', '.join(early)} is set only by the transition to published", where="manifest.json")
    out = copy.deepcopy(manifest)
    out.update(copy.deepcopy(fields))
    out["state"] = to_state
    missing = missing_for(out, to_state)
    if missing:
        raise RecordError(f"cannot move to {to_state}: missing {'; '.join(missing)}", where="manifest.json")
    if to_state == "published" and out["approval"]["manifest_sha256"] != approval_digest(manifest):
        raise RecordError("approval binds another manifest (manifest_sha256 differs from the ready manifest)",
                          where="manifest.json")
    return validate("manifest", out, "manifest.json")


def manifest_bytes(manifest: dict) -> bytes:
    validate("manifest", manifest, "manifest.json")
    return canonical_json(manifest)


def load_manifest(data: bytes, where: str = "manifest.json") -> dict:
    """Parse and validate manifest bytes; also enforce the state's required fields."""
    manifest = validate("manifest", load_json_bytes(data, where=where), where)
    missing = missing_for(manifest, manifest["state"])
    if missing:
        raise RecordError(f"state {manifest['state']} lacks {'; '.join(missing)}", where=where)
    return manifest
