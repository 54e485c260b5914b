"""Checks of lanes that sign with keys of their own, and of lane evidence bound by wheel digest.

A lane listed in keys/signers.json (`lanes`) signs its receipts (lane, phase, verdict-*) with its
own key: they open under that key, never the release key. A lane the manifest's `lane_evidence`
lists as `bound` was qualified elsewhere, for a candidate whose reproducible build gave the same
wheel bytes: its receipts name that candidate and must qualify a wheel this release ships. A lane
listed as `hardware-pending` has evidence for other bytes only: no receipt of it is bound, and a
ready release needs the lane to be optional (then it is disclosed as a warning)."""
from __future__ import annotations

from pathlib import PurePosixPath

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases.candidate import record_candidate
from releases.errors import RecordError
from releases.release_dir import MANIFEST
from releases.signers import SIGNERS, lane_keys
from releases.verify.checker import Checker

_LANE_KINDS = ("lane", "phase")


def lane_of(entry: dict) -> str | None:
    """The lane a manifest receipt entry belongs to (lane, phase and verdict-* receipts), or None."""
    kind, label = entry["kind"], entry.get("label")
    if not label or not (kind in _LANE_KINDS or kind.startswith("verdict-")):
        return None
    return label.split("/", 1)[0]


def _keys(signers: dict | None) -> dict[str, Ed25519PublicKey]:
    try:
        return lane_keys(signers)
    except RecordError:   # load_signers has reported it
        return {}


def signer_for(entry: dict, signers: dict | None, release_key: Ed25519PublicKey) -> Ed25519PublicKey:
    """The key a receipt must verify under: its lane's pinned key when signers.json lists one."""
    return _keys(signers).get(lane_of(entry) or "", release_key)


def _shipped_wheels(manifest: dict) -> set[str]:
    return {a["sha256"] for a in manifest.get("artifacts", []) if a["kind"] == "wheel"}


def check_evidence_binding(check: Checker, entry: dict, stmt: dict, pred: dict, evidence: dict) -> None:
    """A receipt of a lane bound by evidence: it names the candidate the evidence records and
    qualifies the evidence's wheel (subject and, for lane and phase receipts, `artifact`)."""
    rel, kind = entry["path"], entry["kind"]
    named = record_candidate(kind, pred)
    if named is not None and named != evidence["candidate"]:
        check.fail(rel, "payload/predicate/candidate",
                   f"names candidate {named.get('id') if isinstance(named, dict) else named}, the lane's evidence "
                   f"records {evidence['candidate']['id']}")
    first = stmt["subject"][0]["digest"]["sha256"] if stmt["subject"] else None
    if first != evidence["wheel_sha256"]:
        check.fail(rel, "payload/subject/0/digest/sha256",
                   f"qualifies wheel {first}, the lane's evidence is of {evidence['wheel_sha256']}")
    if kind in _LANE_KINDS and pred["artifact"]["sha256"] != evidence["wheel_sha256"]:
        check.fail(rel, "payload/predicate/artifact/sha256",
                   f"qualifies wheel {pred['artifact']['sha256']}, the lane's evidence is of {evidence['wheel_sha256']}")


def check_lane_evidence(check: Checker, manifest: dict, signers: dict | None, *, require_ready: bool) -> None:
    """Every `lane_evidence` entry: its key is the one signers.json pins for the lane; a bound lane
    has its lane receipt here and qualified a shipped wheel; a pending lane has no receipt here and
    its evidence is of other bytes; under require_ready a pending lane must be optional."""
    keys = _keys(signers)
    pinned = {e["name"]: e["key_id"] for e in (signers or {}).get("lanes", [])}
    shipped = _shipped_wheels(manifest)
    lanes_bound = {lane_of(r) for r in manifest.get("receipts", [])} - {None}
    for i, entry in enumerate(manifest.get("lane_evidence", [])):
        lane, where = entry["lane"], f"lane_evidence/{i}"
        if lane not in keys:
            check.fail(MANIFEST, where, f"lane {lane} is bound by evidence but {SIGNERS} pins no key for it")
        elif pinned[lane] != entry["key_id"]:
            check.fail(MANIFEST, f"{where}/key_id", f"lane {lane}'s evidence was checked under key {entry['key_id']}, "
                                                    f"{SIGNERS} pins {pinned[lane]}")
        if entry["status"] == "bound":
            if ("lane", lane) not in {(r["kind"], r["label"]) for r in manifest.get("receipts", [])}:
                check.fail(MANIFEST, where, f"lane {lane} is bound by evidence but its lane receipt is not in the manifest")
            if entry["wheel_sha256"] not in shipped:
                check.fail(MANIFEST, f"{where}/wheel_sha256", f"lane {lane}'s evidence qualifies a wheel this release "
                                                              "does not ship")
            continue
        # hardware-pending
        if lane in lanes_bound:
            check.fail(MANIFEST, where, f"lane {lane} is hardware-pending yet receipts of it are bound")
        if entry["wheel_sha256"] in shipped:
            check.fail(MANIFEST, f"{where}/wheel_sha256", f"lane {lane} is hardware-pending but its evidence is of "
                                                          "the wheel this release ships")
        if not require_ready:
            continue
        wheels = ", ".join(sorted(PurePosixPath(a["path"]).name for a in manifest.get("artifacts", [])
                                  if a["kind"] == "wheel"))
        if entry["optional"]:
            check.warnings.append(f"lane {lane} is hardware-pending: its evidence qualifies wheel sha256 "
                                  f"{entry['wheel_sha256']}, not {wheels}; the lane is optional, so the release is "
                                  "ready without it")
        else:
            check.fail(MANIFEST, f"{where}/status", f"lane {lane} is hardware-pending (its evidence qualifies wheel "
                                                    f"sha256 {entry['wheel_sha256']}, not {wheels}) and not optional")
