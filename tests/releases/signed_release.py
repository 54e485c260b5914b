"""A release whose approver and waiver grantor sign with their own keys (keys/signers.json bound by
the ready manifest), built with the real record, crypto and writer code on top of fixtures.build_release."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from releases import approval as approval_mod
from releases import manifest as mf
from releases.receipts import sign_receipt
from releases.release_dir import ReleaseDir
from releases.signers import add_signers, build_signers
from releases.waivers import build_gate_waiver, sign_waiver
from tests.releases.fixtures import APPROVERS, T1, SyntheticRelease, build_release

APPROVER, GRANTOR = "release-manager", "oncall-lead"


@dataclass
class People:
    approver: Ed25519PrivateKey
    grantor: Ed25519PrivateKey


def new_people() -> People:
    return People(Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate())


def stage_ready(root: Path, people: People, *, allow_unsigned: bool = False,
                waiver_signer: Ed25519PrivateKey | None = None) -> SyntheticRelease:
    """A ready release that binds the signers list and one gate waiver, signed by the grantor
    (or by `waiver_signer`, to forge one)."""
    rel = build_release(root, state="ready")
    rd = ReleaseDir(rel.root)
    signers = build_signers(rel.candidate_ref, approvers={APPROVER: people.approver.public_key(), "oncall-lead": None},
                            grantors={GRANTOR: people.grantor.public_key()}, allow_unsigned_approval=allow_unsigned)
    waiver = sign_waiver(build_gate_waiver(rel.candidate_ref, gate="speed-floor", lane="h200", case="batch-1-1k",
                                           measured="0.97 of incumbent (floor 0.98)", grantor=GRANTOR,
                                           reason="one case, within noise"), waiver_signer or people.grantor)
    m = rel.manifest
    rel.manifest = mf.update(m, signers=add_signers(rel.root, signers), waivers=m["waivers"] + [rd.add_waiver(waiver)])
    rd.write_manifest(rel.manifest, rel.private_key)
    rel.files.update({"signers": "keys/signers.json", "gate-waiver": f"waivers/{waiver['id']}.json"})
    return rel


def approve(rel: SyntheticRelease, *, signer: Ed25519PrivateKey | None, digest: str | None = None,
            approver: str = APPROVER) -> SyntheticRelease:
    """Record a (signed, unless `signer` is None) approval and publish the release directory.
    `digest` signs another manifest digest than the ready one (a replayed signature)."""
    m = rel.manifest
    acked = [w["id"] for w in m["waivers"]]
    signature = None
    if signer is not None:
        signature = approval_mod.sign_decision(digest or mf.approval_digest(m), decision="approve", approver=approver,
                                               reason="all gates green", acknowledged_waivers=acked, private_key=signer)
    # The pipeline's check (build_approval) would refuse a bad signature; write what an attacker would.
    record = {"candidate": m["candidate"], "manifest_sha256": mf.approval_digest(m), "decision": "approve",
              "approver": approver, "reason": "all gates green", "acknowledged_waivers": sorted(acked),
              "flow_run_id": "flow-run-1", "decided_at": T1, "signed": signature is not None}
    if signature is not None:
        record.update(key_id=signature["signatures"][0]["keyid"], signature=signature)
    rd = ReleaseDir(rel.root)
    env = sign_receipt("approval", approval_mod.approval_subjects(record), record, rel.private_key)
    rel.manifest = mf.transition(m, "published", approval=rd.add_approval(env, record, record["manifest_sha256"]))
    rd.write_manifest(rel.manifest, rel.private_key)
    return rel


__all__ = ["APPROVERS", "APPROVER", "GRANTOR", "People", "new_people", "stage_ready", "approve"]
