"""Record-level checks of verify_release: candidate binding, receipts, subjects, readiness, approval."""
from __future__ import annotations

from pathlib import PurePosixPath

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from releases.canonical import digest
from releases.candidate import candidate_mismatch, record_candidate
from releases.ledger import closure_problems
from releases.errors import RecordError, SchemaError
from releases.manifest import approval_digest
from releases.receipts import open_receipt
from releases.release_dir import BUILT_KINDS
from releases.verify.acceptance import check_acceptance_ready, latest_attempts
from releases.verify.checker import Checker
from releases.verify.lanes import check_evidence_binding, check_lane_evidence, lane_of, signer_for
from releases.verify.people import check_approval_signature, check_waiver, load_signers

_CANDIDATE_FIELD = {"build": "payload/predicate/buildDefinition/externalParameters/candidate",
                    "candidate": "payload/predicate"}


def _open(check: Checker, rel: str, kind: str, key: Ed25519PublicKey) -> tuple[dict, dict] | None:
    envelope = check.json(rel, "envelope")
    if envelope is None:
        return None
    try:
        stmt, predicate = open_receipt(envelope, key, expected_kind=kind, where=rel)
    except SchemaError as exc:
        check.fail(rel, "payload" + exc.path, f"{exc.kind} schema: {exc.message}")
        return None
    except RecordError as exc:
        field = "signatures" if "signature" in exc.message else "payload"
        check.fail(rel, field, exc.message)
        return None
    check.counts["signatures"] += 1
    return stmt, predicate


def _check_candidate(check: Checker, rel: str, kind: str, record: dict, expected: dict, field: str) -> None:
    problem = candidate_mismatch(record_candidate(kind, record), expected)
    if problem:
        check.fail(rel, field, problem)


def _check_subjects(check: Checker, rel: str, stmt: dict, by_name: dict[str, dict]) -> None:
    for i, subject in enumerate(stmt["subject"]):
        if "/" in subject["name"]:
            # Not one of this release's artifacts (they are named bare): e.g. a judged verdict's
            # `incumbent/<wheel>`, whose file name may well equal the candidate wheel's.
            continue
        art = by_name.get(subject["name"])
        if art is not None and subject["digest"]["sha256"] != art["sha256"]:
            check.fail(rel, f"payload/subject/{i}/digest/sha256", f"subject {subject['name']} digest differs from the artifact's")


def _check_kind(check: Checker, rel: str, kind: str, stmt: dict, pred: dict, manifest: dict, by_name: dict) -> None:
    arts_by_sha = {a["sha256"] for a in manifest.get("artifacts", [])}
    if kind == "candidate":
        cid = manifest["candidate"]["id"]
        if any(s["digest"]["sha256"] != cid for s in stmt["subject"]):
            check.fail(rel, "payload/subject", "subject digest is not the candidate id")
    elif kind == "lane":
        if pred["artifact"]["sha256"] not in arts_by_sha:
            check.fail(rel, "payload/predicate/artifact/sha256", "lane qualified an artifact this release does not ship")
        _check_phase_binding(check, rel, pred, manifest)
    elif kind == "acceptance":
        for i, asset in enumerate(pred["assets"]):
            art = by_name.get(PurePosixPath(asset["name"]).name)
            if art is None or art["sha256"] != asset["sha256"]:
                check.fail(rel, f"payload/predicate/assets/{i}", f"staged asset {asset['name']} is not a shipped artifact")
    elif kind == "reproducibility":
        compared = {PurePosixPath(f["name"]).name for f in pred["files"]}
        built = {n for n, a in by_name.items() if a["kind"] in BUILT_KINDS}
        for name in sorted(built - compared):
            check.fail(rel, "payload/predicate/files", f"shipped artifact {name} was not compared")
        for i, f in enumerate(pred["files"]):
            art = by_name.get(PurePosixPath(f["name"]).name)
            if art is None:
                continue
            shas = {f["a_sha256"]} if f["identical"] else {f["a_sha256"], f["b_sha256"]}
            if art["sha256"] not in shas:
                check.fail(rel, f"payload/predicate/files/{i}", f"{f['name']} digests do not include the shipped artifact's")


def _check_build_coverage(check: Checker, manifest: dict, builds: dict[str, dict], verdict: str | None) -> None:
    for i, art in enumerate(manifest.get("artifacts", [])):
        if art["kind"] not in BUILT_KINDS:
            continue  # a docs asset is written, not built
        name = PurePosixPath(art["path"]).name
        found = [lbl for lbl, stmt in builds.items()
                 if any(PurePosixPath(s["name"]).name == name and s["digest"]["sha256"] == art["sha256"] for s in stmt["subject"])]
        if not found and builds:
            check.fail(art["path"], "sha256", f"no build receipt has artifacts/{i} among its subjects")
        elif verdict == "reproducible" and len(found) != len(builds):
            missing = sorted(set(builds) - set(found))
            check.fail(art["path"], "sha256", f"declared reproducible but build(s) {', '.join(missing)} produced other bytes")


def _check_approval(check: Checker, manifest: dict, key: Ed25519PublicKey, signers: dict | None, *,
                    require_signed: bool) -> None:
    entry = manifest["approval"]
    rel = entry["path"]
    opened = _open(check, rel, "approval", key)
    if opened is None:
        return
    stmt, pred = opened
    _check_candidate(check, rel, "approval", pred, manifest["candidate"], "payload/predicate/candidate")
    expected = approval_digest(manifest)
    if pred["manifest_sha256"] != expected:
        check.fail(rel, "payload/predicate/manifest_sha256", "approval binds another manifest")
    if any(s["digest"]["sha256"] != pred["manifest_sha256"] for s in stmt["subject"]):
        check.fail(rel, "payload/subject", "subject digest is not the approved manifest digest")
    if pred["decision"] != "approve":
        check.fail(rel, "payload/predicate/decision", f"decision is {pred['decision']}, not approve")
    for key_name in ("manifest_sha256", "decision", "approver"):
        if entry[key_name] != pred[key_name]:
            check.fail("manifest.json", f"approval/{key_name}", "differs from the signed approval receipt")
    unacked = sorted({w["id"] for w in manifest.get("waivers", [])} - set(pred["acknowledged_waivers"]))
    if unacked:
        check.fail(rel, "payload/predicate/acknowledged_waivers", f"waivers not acknowledged: {', '.join(unacked)}")
    check_approval_signature(check, manifest, rel, pred, signers, require_signed=require_signed)


def _check_phase_binding(check: Checker, rel: str, pred: dict, manifest: dict) -> None:
    """A lane binds its phase receipts by digest: each must be a receipt of this manifest (kind
    `phase`, the same label and sha256), and every phase the lane ran must have one."""
    bound = {r["label"]: r for r in manifest.get("receipts", []) if r["kind"] == "phase"}
    named = {p["phase"] for p in pred.get("phase_receipts", [])}
    for i, p in enumerate(pred.get("phase_receipts", [])):
        entry = bound.get(p["label"])
        if entry is None:
            check.fail(rel, f"payload/predicate/phase_receipts/{i}", f"phase receipt {p['label']} is not in the manifest")
        elif entry["sha256"] != p["sha256"]:
            check.fail(rel, f"payload/predicate/phase_receipts/{i}/sha256",
                       f"phase receipt {p['label']} in the manifest is not the one the lane bound")
    if "phase_receipts" in pred:
        for i, phase in enumerate(pred["phases"]):
            if phase["name"] not in named:
                check.fail(rel, f"payload/predicate/phases/{i}", f"phase {phase['name']} has no bound phase receipt")


def _check_verdicts_waived(check: Checker, preds: dict[str, list[tuple[str, dict]]], waivers: dict[str, dict]) -> None:
    """A verdict that did not pass blocks the release unless the waivers it records as applied are
    bound by this manifest (by digest) and it no longer blocks."""
    bound = {digest(w) for w in waivers.values()}
    for kind in sorted(k for k in preds if k.startswith("verdict-")):
        for rel, p in preds[kind]:
            if p["verdict"] == "pass":
                continue
            judged = p.get("judged") or {}
            applied = [w for w in judged.get("waivers", []) if w["applied"]]
            if judged.get("blocking", True) or not applied:
                check.fail(rel, "payload/predicate/verdict", f"{kind} is {p['verdict']} and no waiver covers it")
            for w in applied:
                if w["sha256"] not in bound:
                    check.fail(rel, "payload/predicate/judged/waivers",
                               f"{kind} was waived by {w['id'] or w['sha256'][:16]}, which this release does not bind")


def _check_ready(check: Checker, preds: dict[str, list[tuple[str, dict]]], waivers: dict[str, dict]) -> None:
    phases = {p["label"]: (r, p) for r, p in preds.get("phase", [])}
    for rel, p in preds.get("lane", []):
        for i, bound in enumerate(p.get("phase_receipts", [])):
            phase_rel, phase = phases.get(bound["label"], (None, None))
            if p["verdict"] == "pass" and phase is not None and phase["status"] != "pass":
                check.fail(phase_rel, "payload/predicate/status",
                           f"phase {bound['label']} is {phase['status']} under a passing lane")
    _check_verdicts_waived(check, preds, waivers)
    lanes = preds.get("lane", [])
    if not any(p["verdict"] == "pass" for _, p in lanes):
        check.fail("manifest.json", "receipts", "no lane receipt with verdict pass")
    lane_waived = {w["subject"] for w in waivers.values() if w["scope"] == "lane"}
    for rel, p in lanes:
        if p["verdict"] != "pass" and p["lane"] not in lane_waived:
            check.fail(rel, "payload/predicate/verdict", f"lane {p['lane']} is {p['verdict']} and not waived")
    latest = {rel for rel, _ in latest_attempts(preds).values()}
    for rel, p in preds.get("acceptance", []):
        if "lane" in p and rel not in latest:
            continue  # a lane's window may be retried: only its latest attempt decides
        if p["verdict"] != "pass" and "lane" not in p:  # a lane's: releases.verify.acceptance names it
            check.fail(rel, "payload/predicate/verdict", f"acceptance window is {p['verdict']}")
        window = p["window"]
        if window["held_s"] > window["max_hold_s"]:
            check.fail(rel, "payload/predicate/window/held_s",
                       f"host held {window['held_s']}s, longer than the allowed {window['max_hold_s']}s")
        if window["closed_at"] < window["opened_at"]:  # same-offset RFC 3339 strings compare in time order
            check.fail(rel, "payload/predicate/window/closed_at", "window closed before it opened")
    for rel, p in preds.get("reproducibility", []):
        if p["verdict"] == "not_reproducible":
            check.fail(rel, "payload/predicate/verdict", "builds are not reproducible")
        elif p["verdict"] == "waived":
            for wid in p["waived"]:
                w = waivers.get(wid)
                if w is None or w["scope"] != "reproducibility":
                    check.fail(rel, "payload/predicate/waived", f"waiver {wid} is not bound by the manifest (scope reproducibility)")


def check_records(check: Checker, manifest: dict, key: Ed25519PublicKey, *, require_ready: bool,
                  require_signed_approval: bool = False) -> None:
    expected = manifest["candidate"]
    entry = manifest.get("candidate_record")
    if entry:
        record = check.json(entry["path"], "candidate", "candidate_record")
        if record is not None and digest(record) != expected["id"]:
            check.fail(entry["path"], "", "candidate record digest is not the manifest's candidate id")
        if record is not None:
            for k in ("commit", "tree"):
                if record[k] != expected[k]:
                    check.fail(entry["path"], k, f"{k} differs from the manifest's candidate")
    by_name = {PurePosixPath(a["path"]).name: a for a in manifest.get("artifacts", [])}
    preds: dict[str, list[tuple[str, dict]]] = {}
    builds: dict[str, dict] = {}
    signers = load_signers(check, manifest)   # before the receipts: it names the lanes' own keys
    evidence = {e["lane"]: e for e in manifest.get("lane_evidence", []) if e["status"] == "bound"}
    for r in manifest.get("receipts", []):
        opened = _open(check, r["path"], r["kind"], signer_for(r, signers, key))
        if opened is None:
            continue
        stmt, pred = opened
        if lane_of(r) in evidence:   # bound by the wheel's digest, not by this candidate
            check_evidence_binding(check, r, stmt, pred, evidence[lane_of(r)])
        else:
            field = _CANDIDATE_FIELD.get(r["kind"], "payload/predicate/candidate")
            _check_candidate(check, r["path"], r["kind"], pred, expected, field)
        _check_subjects(check, r["path"], stmt, by_name)
        _check_kind(check, r["path"], r["kind"], stmt, pred, manifest, by_name)
        preds.setdefault(r["kind"], []).append((r["path"], pred))
        if r["kind"] == "build":
            builds[r["label"] or r["path"]] = stmt
    verdicts = [p["verdict"] for _, p in preds.get("reproducibility", [])]
    _check_build_coverage(check, manifest, builds, verdicts[0] if verdicts else None)
    if "ledger" in manifest:
        ledger = check.json(manifest["ledger"]["path"], "ledger", "ledger")
        if ledger is not None:
            _check_candidate(check, manifest["ledger"]["path"], "ledger", ledger, expected, "candidate")
            if require_ready:  # the closure rule: no open in-scope P0/P1 item, and a closure
                for problem in closure_problems(ledger):
                    check.fail(manifest["ledger"]["path"], "closure", problem)
    check_lane_evidence(check, manifest, signers, require_ready=require_ready)
    waivers: dict[str, dict] = {}
    for i, w in enumerate(manifest.get("waivers", [])):
        record = check.json(w["path"], "waiver", f"waivers/{i}")
        if record is None:
            continue
        _check_candidate(check, w["path"], "waiver", record, expected, "candidate")
        if record["id"] != w["id"]:
            check.fail(w["path"], "id", f"waiver id {record['id']} but the manifest binds it as {w['id']}")
        check_waiver(check, w["path"], record, signers)
        waivers[w["id"]] = record
    if "approval" in manifest:
        _check_approval(check, manifest, key, signers, require_signed=require_signed_approval)
    if require_ready:
        _check_ready(check, preds, waivers)
        check_acceptance_ready(check, manifest, preds)
