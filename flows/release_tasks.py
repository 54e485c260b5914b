"""Tasks after qualification: compose the manifest to ready, record the approval, publish."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact

from flows.config import Config
from flows.stores import open_store, store_location
from flows.tasks import _key, now
from flows.workspace import Workspace
from releases import approval as approval_mod
from releases import manifest as mf, receipts
from releases.canonical import canonical_json
from releases.candidate import candidate_ref
from releases.ledger import default_ledger
from releases.publish import publish_release
from releases.release_dir import CANDIDATE, ReleaseDir
from releases.waivers import bind_waiver


def _receipt_entries(ws: Workspace) -> list[dict]:
    entries = []
    for path in sorted((ws.release / "receipts").glob("*.dsse.json")):
        stem = path.name.removesuffix(".dsse.json")
        kind, _, label = stem.partition("-")
        if kind == "approval":
            continue
        entries.append({"kind": kind, "label": label or None, "path": f"receipts/{path.name}",
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return entries


@task(name="compose manifest")
def compose_manifest(cfg: Config, ws: Workspace, candidate: dict, packaged: dict, waivers: list[dict]) -> dict:
    """draft -> candidate -> ready, binding every receipt, the ledger and the waivers."""
    ref = candidate_ref(candidate)
    rd, key = ReleaseDir(ws.release), _key(cfg)
    public = rd.add_public_key(key.public_key())
    receipts_ = _receipt_entries(ws)
    ledger = default_ledger(ref, at=now())  # no reviewer input yet: says so, claims no review
    waiver_entries = [rd.add_waiver(bind_waiver(w, ref)) for w in waivers]
    manifest = mf.new_manifest(candidate["release_version"], ref)
    manifest = mf.transition(manifest, "candidate", candidate_record={"path": CANDIDATE, "sha256": _sha(ws, CANDIDATE)},
                             public_key=public, receipts=receipts_)
    manifest = mf.transition(manifest, "ready", artifacts=packaged["artifacts"], sboms=packaged["sboms"],
                             sums=packaged["sums"], ledger=rd.add_ledger(ledger), waivers=waiver_entries)
    rd.write_manifest(manifest, key)
    create_markdown_artifact(key="manifest", description="The ready manifest", markdown=summary_markdown(manifest))
    return manifest


def _sha(ws: Workspace, rel: str) -> str:
    return hashlib.sha256((ws.release / rel).read_bytes()).hexdigest()


def summary_markdown(manifest: dict) -> str:
    lines = [f"## Release {manifest['version']} — {manifest['state']}", "",
             f"Candidate `{manifest['candidate']['commit']}` (tree `{manifest['candidate']['tree'][:12]}`, "
             f"id `{manifest['candidate']['id'][:16]}`)", "", "| receipt | sha256 |", "|---|---|"]
    lines += [f"| {r['path']} | `{r['sha256'][:16]}` |" for r in manifest.get("receipts", [])]
    lines += ["", "| asset | sha256 |", "|---|---|"]
    lines += [f"| {a['path']} | `{a['sha256'][:16]}` |" for a in manifest.get("artifacts", []) + manifest.get("sboms", [])]
    waivers = manifest.get("waivers", [])
    lines += ["", f"Waivers bound: {', '.join(w['id'] for w in waivers) if waivers else 'none'}"]
    return "\n".join(lines)


@task(name="record approval")
def record_approval(cfg: Config, ws: Workspace, manifest: dict, decision: dict, flow_run_id: str) -> dict:
    """Check the approver and the acknowledged waivers, sign the decision (approve or reject)."""
    record = approval_mod.build_approval(
        manifest, decision=decision["decision"], approver=decision["approver"], allowed_approvers=cfg.approvers,
        reason=decision["reason"], acknowledged_waivers=decision.get("acknowledged_waivers", []),
        flow_run_id=flow_run_id)
    envelope = receipts.sign_receipt("approval", approval_mod.approval_subjects(record), record, _key(cfg))
    (ws.root / "approval.dsse.json").write_bytes(canonical_json(envelope))
    create_markdown_artifact(key="approval", description="The approval decision", markdown=(
        f"### {record['decision']} by {record['approver']}\n\n{record['reason']}\n\n"
        f"binds manifest `{record['manifest_sha256'][:16]}`"))
    return {"record": record, "envelope": envelope}


@task(name="publish release")
def publish(cfg: Config, ws: Workspace, manifest: dict, approval: dict) -> dict:
    """Move the manifest to published, then upload: assets first, manifest last, verify after."""
    log = get_run_logger()
    rd = ReleaseDir(ws.release)
    entry = rd.add_approval(approval["envelope"], approval["record"], approval["record"]["manifest_sha256"])
    receipts_ = manifest["receipts"]
    published = mf.transition(manifest, "published", approval=entry, receipts=receipts_)
    rd.write_manifest(published, _key(cfg))
    store = open_store(cfg)
    publish_release(ws.release, store, published["version"],
                    progress=lambda key, done, total: log.info("uploaded %d/%d: %s", done, total, key))
    location = store_location(store, published["version"])
    ws.summary.write_text(json.dumps({"version": published["version"], "location": location}))
    create_link_artifact(key="published", link=location if location.startswith("s3://") else Path(location).as_uri(),
                         description=f"Published release {published['version']}")
    return {"version": published["version"], "location": location}
