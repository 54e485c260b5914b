"""The release as one object: everything a candidate's release directory receives goes through here.

A ReleaseStager owns one staging workspace: the release directory being written (`release/`) and
an index of what has been added to it (`staged.json`, outside the release directory so that the
directory stays closed over its manifest). It loads the signing key once, signs receipts of any
kind, keeps the manifest entries it returned (so nothing is ever rediscovered by globbing file
names), composes the ready manifest, records the approval and publishes.

Every step is idempotent per (kind, label): a retried task replaces its entry instead of adding a
second one, and a new process (a resumed run) picks the index up where the last one left it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from releases import approval as approval_mod
from releases import keys, manifest as mf, receipts
from releases.atomic import write_atomic
from releases.candidate import candidate_ref, candidate_subject, require_candidate
from releases.canonical import canonical_json, file_sha256, load_json_bytes
from releases.clock import utc_now
from releases.errors import RecordError
from releases.evidence import Evidence
from releases.ledger import bind_ledger, default_ledger, require_closed
from releases.notes import write_notes
from releases.publish import PublishResult, publish_release
from releases.release_dir import CANDIDATE, MANIFEST, ReleaseDir
from releases.signers import add_signers
from releases.keys import key_id, load_public_key, public_pem
from releases.verify import VerificationReport, verify_release
from releases.waivers import bind_waiver

INDEX = "staged.json"
RELEASE = "release"


def _acceptance_field(lanes: Iterable[str], incumbent: dict | None) -> dict:
    """The manifest's `acceptance` field, only when there is something to declare (so that a
    release staged without acceptance windows keeps the manifest it always had)."""
    lanes = list(dict.fromkeys(lanes))
    if not lanes and incumbent is None:
        return {}
    return {"acceptance": {"lanes": lanes, "incumbent": dict(incumbent) if incumbent is not None else None}}


@dataclass(frozen=True)
class Approval:
    """A signed decision: the record, its envelope, and the published manifest when approved."""

    record: dict
    envelope: dict
    manifest: dict | None


class ReleaseStager:
    """Stage one candidate's release under `workspace` (see the module docstring)."""

    def __init__(self, workspace: str | Path, private_key: Ed25519PrivateKey) -> None:
        self.workspace = Path(workspace)
        self.dir = ReleaseDir(self.workspace / RELEASE)
        self._key = private_key
        self._index_path = self.workspace / INDEX
        self._index = self._load_index()

    @classmethod
    def open(cls, workspace: str | Path, keys_dir: str | Path) -> tuple["ReleaseStager", bool]:
        """A stager signing with the local release key in `keys_dir` (created 0600 when absent);
        returns (stager, created)."""
        path, created = keys.ensure_local_key(keys_dir)
        return cls(workspace, keys.load_private_key(path)), created

    # -- what has been staged -------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return self.dir.root

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._key.public_key()

    @property
    def candidate(self) -> dict:
        """The frozen candidate record (RecordError before add_candidate)."""
        if "candidate" not in self._index:
            raise RecordError("no candidate has been staged yet", where=str(self._index_path.name))
        return load_json_bytes((self.root / CANDIDATE).read_bytes(), where=CANDIDATE)

    @property
    def receipts(self) -> list[dict]:
        """The manifest entries of every receipt staged so far, in the order they were added."""
        return [dict(e) for e in self._index["receipts"]]

    def _load_index(self) -> dict[str, Any]:
        if self._index_path.exists():
            return load_json_bytes(self._index_path.read_bytes(), where=INDEX)
        return {"receipts": [], "artifacts": [], "sboms": []}

    @property
    def lane_evidence(self) -> list[dict]:
        """The manifest's `lane_evidence` entries staged so far: lanes bound by evidence or pending."""
        return [dict(e) for e in self._index.get("lane_evidence", [])]

    def _save(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        write_atomic(self._index_path, canonical_json(self._index))

    def _keep(self, list_name: str, entry: dict, same: Callable[[dict], bool]) -> dict:
        self._index[list_name] = [e for e in self._index[list_name] if not same(e)] + [entry]
        self._save()
        return entry

    # -- adding ---------------------------------------------------------------------------------

    def add_candidate(self, record: dict) -> dict:
        """candidate.json and its signed `candidate` receipt; returns the candidate ref."""
        ref = candidate_ref(record)
        self.dir.add_candidate(record)
        self._index["candidate"] = ref
        self.add_receipt("candidate", [candidate_subject(record)], record)
        return ref

    def add_receipt(self, kind: str, subjects: list[dict], predicate: dict, label: str | None = None) -> dict:
        """Sign a receipt of any known kind with the release key and stage it."""
        envelope = receipts.sign_receipt(kind, subjects, predicate, self._key)
        return self._stage_envelope(kind, envelope, label)

    def add_signed_receipt(self, kind: str, envelope: dict, label: str | None = None,
                           signer: Ed25519PublicKey | None = None) -> dict:
        """Stage a receipt signed elsewhere (a lane's), after opening it with `signer` (default: the
        release key) and checking that it is a `kind` receipt about this candidate."""
        where = f"{kind}{'/' + label if label else ''}"
        _, predicate = receipts.open_receipt(envelope, signer or self.public_key, expected_kind=kind, where=where)
        require_candidate(kind, predicate, self._index.get("candidate") or {}, where=where)
        return self._stage_envelope(kind, envelope, label)

    def add_lane_evidence(self, evidence: Evidence, signer: Ed25519PublicKey, *, optional: bool = False) -> dict:
        """Stage sound lane evidence (releases.evidence.check_evidence) about the wheel this release
        ships: each envelope is opened again with the lane's pinned key `signer`, and staged as it
        is (the paths inside the lane receipt stay true). The candidate the receipts name may be
        another whose reproducible build gave the same wheel bytes: the binding is the wheel's
        sha256. Records the lane as `bound` in the manifest's `lane_evidence`."""
        where = f"lane evidence {evidence.lane}"
        wheels = {a["sha256"] for a in self._index["artifacts"] if a["kind"] == "wheel"}
        if evidence.wheel["sha256"] not in wheels:
            raise RecordError(f"the evidence qualifies wheel sha256 {evidence.wheel['sha256']}, which this release "
                              f"does not ship (its wheels: {', '.join(sorted(wheels)) or 'none staged'})", where=where)
        if key_id(signer) != evidence.key_id:
            raise RecordError(f"the evidence was checked under key {evidence.key_id}, not the lane's {key_id(signer)}",
                              where=where)
        for kind, label, rel, envelope in evidence.receipts:
            receipts.open_receipt(envelope, signer, expected_kind=kind, where=rel)
            self._stage_envelope(kind, envelope, label)
        return self._lane_status(evidence.lane, evidence.kind, "bound", optional=optional, signer=signer,
                                 wheel_sha256=evidence.wheel["sha256"], candidate=evidence.candidate)

    def add_lane_pending(self, evidence: Evidence, signer: Ed25519PublicKey, *, optional: bool, reason: str) -> dict:
        """Record lane `evidence.lane` as hardware-pending: its (sound) evidence qualifies other wheel
        bytes than this release ships, so none of its receipts is staged. verify refuses a ready
        release with a pending lane that is not optional, and discloses one that is."""
        return self._lane_status(evidence.lane, evidence.kind, "hardware-pending", optional=optional, signer=signer,
                                 wheel_sha256=evidence.wheel["sha256"], candidate=evidence.candidate, reason=reason)

    def _lane_status(self, lane: str, kind: str, status: str, *, optional: bool, signer: Ed25519PublicKey,
                     wheel_sha256: str, candidate: dict, reason: str | None = None) -> dict:
        entry = {"lane": lane, "kind": kind, "status": status, "optional": bool(optional), "key_id": key_id(signer),
                 "wheel_sha256": wheel_sha256, "candidate": dict(candidate), **({"reason": reason} if reason else {})}
        self._index.setdefault("lane_keys", {})[lane] = public_pem(signer).decode("ascii")
        self._index.setdefault("lane_evidence", [])
        return self._keep("lane_evidence", entry, lambda e: e["lane"] == lane)

    def _signer_for(self, entry: dict) -> Ed25519PublicKey:
        """The key a staged receipt opens with: its lane's pinned key when evidence staged one, else
        the release key."""
        kind, label = entry["kind"], entry.get("label") or ""
        lane = label.split("/", 1)[0] if kind in ("lane", "phase") or kind.startswith("verdict-") else None
        pem = self._index.get("lane_keys", {}).get(lane) if lane else None
        return load_public_key(pem) if pem else self.public_key

    def _stage_envelope(self, kind: str, envelope: dict, label: str | None) -> dict:
        entry = self.dir.add_receipt(kind, envelope, label=label)
        return self._keep("receipts", entry, lambda e: (e["kind"], e["label"]) == (kind, label))

    def add_artifact(self, src: str | Path, kind: str) -> dict:
        entry = self.dir.add_artifact(src, kind)
        return self._keep("artifacts", entry, lambda e: e["path"] == entry["path"])

    def add_sbom(self, src: str | Path, fmt: str) -> dict:
        entry = self.dir.add_sbom(src, fmt)
        return self._keep("sboms", entry, lambda e: e["path"] == entry["path"])

    def write_sums(self) -> dict:
        """SHA256SUMS over the staged artifacts and SBOMs."""
        self._index["sums"] = self.dir.write_sums()
        self._save()
        return self._index["sums"]

    # -- composing, approving, publishing -------------------------------------------------------

    def compose(self, *, waivers: Iterable[dict] = (), ledger: dict | None = None,
                signers: dict | None = None, acceptance_lanes: Iterable[str] = (),
                incumbent: dict | None = None) -> dict:
        """draft -> candidate -> ready over everything staged; binds the review ledger (refused
        unless it is about this candidate and closed: no open in-scope P0/P1) and the waivers.
        Without a ledger, the honest default: no review items were recorded. `signers` (a
        releases.signers record: the approvers and waiver grantors with their public keys) is bound
        so that verify can check the people's signatures against the pinned release key.
        `acceptance_lanes` (the lanes that declare an acceptance window) and `incumbent` (the release
        this one upgrades, {"version": ...}, or None for a first release) go into the manifest's
        `acceptance` field, which verify --require-ready holds the acceptance and rehearsal receipts to."""
        ref = self._index.get("candidate")
        if ref is None:
            raise RecordError("compose needs a staged candidate", where=INDEX)
        staged = self.receipts
        ledger = require_closed(bind_ledger(ledger, ref)) if ledger is not None else default_ledger(ref, at=utc_now())
        waiver_entries = [self.dir.add_waiver(bind_waiver(w, ref)) for w in waivers]
        manifest = mf.new_manifest(self.candidate["release_version"], ref)
        manifest = mf.transition(manifest, "candidate",
                                 candidate_record={"path": CANDIDATE, "sha256": file_sha256(self.root / CANDIDATE)},
                                 public_key=self.dir.add_public_key(self.public_key), receipts=staged)
        lane_evidence = {"lane_evidence": self.lane_evidence} if self._index.get("lane_evidence") else {}
        manifest = mf.transition(manifest, "ready", artifacts=self._index["artifacts"], sboms=self._index["sboms"],
                                 sums=self._index.get("sums") or self.write_sums(),
                                 ledger=self.dir.add_ledger(ledger), waivers=waiver_entries, **lane_evidence,
                                 **({"signers": add_signers(self.root, signers)} if signers is not None else {}),
                                 **_acceptance_field(acceptance_lanes, incumbent))
        self.dir.write_manifest(manifest, self._key)
        return manifest

    def predicate(self, entry: dict, signer: Ed25519PublicKey | None = None) -> dict:
        """The predicate of a staged receipt, opened with `signer` (default: its lane's pinned key for
        staged lane evidence, else the release key)."""
        envelope = load_json_bytes((self.root / entry["path"]).read_bytes(), where=entry["path"])
        return receipts.open_receipt(envelope, signer or self._signer_for(entry), expected_kind=entry["kind"],
                                     where=entry["path"])[1]

    def manifest(self) -> dict:
        """The manifest as written last (ready after compose, published after an approval)."""
        return mf.load_manifest((self.root / MANIFEST).read_bytes())

    def verify(self, *, require_ready: bool = True, private_markers: Iterable[str] = ()) -> VerificationReport:
        """Verify the staged directory against this stager's own public key."""
        return verify_release(self.root, public_key=self.public_key, require_ready=require_ready,
                              private_markers=private_markers)

    def check_decision(self, decision: dict, *, allowed_approvers: Iterable[str], flow_run_id: str,
                       approver_keys: Mapping[str, Any] | None = None, allow_unsigned: bool = True) -> dict:
        """The approval record a decision would make over the ready manifest, or ApprovalRefused
        (unlisted approver, unacknowledged waiver, a signature that is missing where required or
        does not verify against the approver's listed key, or binds another manifest)."""
        return approval_mod.build_approval(
            self.manifest(), decision=decision["decision"], approver=decision["approver"],
            allowed_approvers=allowed_approvers, reason=decision["reason"],
            acknowledged_waivers=decision.get("acknowledged_waivers", []), flow_run_id=flow_run_id,
            signature=decision.get("signature"), approver_keys=approver_keys, allow_unsigned=allow_unsigned)

    def record_approval(self, decision: dict, *, allowed_approvers: Iterable[str], flow_run_id: str,
                        approver_keys: Mapping[str, Any] | None = None, allow_unsigned: bool = True) -> Approval:
        """Sign the decision over the ready manifest; an approval also renders the release notes
        and moves the manifest to published (in the staged directory: nothing is uploaded until
        publish)."""
        ready = self.manifest()
        record = self.check_decision(decision, allowed_approvers=allowed_approvers, flow_run_id=flow_run_id,
                                     approver_keys=approver_keys, allow_unsigned=allow_unsigned)
        envelope = receipts.sign_receipt("approval", approval_mod.approval_subjects(record), record, self._key)
        if record["decision"] != "approve":
            return Approval(record, envelope, None)
        entry = self.dir.add_approval(envelope, record, record["manifest_sha256"])
        # The notes render from the published records (the approval included); the renderer
        # ignores the manifest's own `notes` entry, so binding them changes none of their bytes.
        notes = write_notes(self.root, manifest=mf.transition(ready, "published", approval=entry))
        published = mf.transition(ready, "published", approval=entry, notes=notes)
        self.dir.write_manifest(published, self._key)
        return Approval(record, envelope, published)

    def publish(self, store, progress: Callable[[str, int, int], None] | None = None,
                private_markers: Iterable[str] = ()) -> PublishResult:
        """Upload the published directory write-once: assets first, manifest last, verified after."""
        published = self.manifest()
        return publish_release(self.root, store, published["version"], progress=progress,
                               public_key=self.public_key, private_markers=private_markers)

