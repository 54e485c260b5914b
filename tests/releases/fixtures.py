"""A complete synthetic release directory, built with the real record, crypto and writer code.

Other test folders can use it:

    from tests.releases.fixtures import build_release
    rel = build_release(tmp_path / "1.2.3")             # published, verifies with require_ready
    rel = build_release(tmp_path / "r", state="ready")  # ready, not yet approved

or the pytest fixtures `published_release` / `ready_release` (tests/releases/conftest.py).
Artifacts are small but real: a wheel-shaped zip and a gzip'd tar, with fixed timestamps.
"""
from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from releases import approval as approval_mod
from releases import keys, manifest as mf
from releases.candidate import candidate_ref
from releases.canonical import file_sha256
from releases.ledger import new_ledger
from releases.ledger_edits import add_item, close
from releases.receipts import sign_receipt
from releases.release_dir import ReleaseDir
from releases.waivers import build_waiver

COMMIT = "1" * 40
TREE = "2" * 40
EPOCH = 1_700_000_000
T0, T1 = "2026-01-02T03:04:05Z", "2026-01-02T03:14:05Z"
APPROVERS = ("release-manager", "oncall-lead")


@dataclass
class SyntheticRelease:
    root: Path
    version: str
    private_key: Ed25519PrivateKey
    public_key: Ed25519PublicKey
    private_key_path: Path
    candidate: dict
    candidate_ref: dict
    manifest: dict
    files: dict[str, str]  # role ("artifact", "sbom", "receipt-lane", ...) -> relative path


def candidate_record(version: str = "1.2.3", commit: str = COMMIT, tree: str = TREE) -> dict:
    return {"candidate_schema": "assay/candidate/v1",
            "source": {"name": "engine", "subdir": "engine", "ref": "refs/heads/main"},
            "commit": commit, "tree": tree, "source_date_epoch": EPOCH, "dirty": False, "dirty_digest": None,
            "package": {"name": "assay-engine", "version": version}, "release_version": version}


def make_wheel(path: Path, version: str, extra_members: dict[str, str | bytes] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        # extra_members may replace engine/__init__.py (the installer tests ship the real engine).
        members = {"engine/__init__.py": "VERSION = %r\n" % version, **(extra_members or {}),
                   f"assay_engine-{version}.dist-info/METADATA": f"Name: assay-engine\nVersion: {version}\n",
                   f"assay_engine-{version}.dist-info/RECORD": ""}
        for name, body in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), body)
    return path


def make_sdist(path: Path, version: str) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        body = f"[project]\nname = 'assay-engine'\nversion = '{version}'\n".encode()
        info = tarfile.TarInfo(f"assay_engine-{version}/pyproject.toml")
        info.size, info.mtime, info.mode = len(body), EPOCH, 0o644
        tf.addfile(info, io.BytesIO(body))
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def make_sboms(stage: Path, version: str, arts: dict[str, Path]) -> tuple[Path, Path]:
    spdx = {"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
            "name": f"assay-engine-{version}", "documentNamespace": f"https://assay.dev/spdx/assay-engine-{version}",
            "creationInfo": {"created": T0, "creators": ["Tool: assay"]},
            "packages": [{"SPDXID": "SPDXRef-Package", "name": "assay-engine", "versionInfo": version,
                          "downloadLocation": "NOASSERTION",
                          "checksums": [{"algorithm": "SHA256", "checksumValue": file_sha256(p)} for p in arts.values()]}]}
    cdx = {"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
           "components": [{"type": "library", "name": "assay-engine", "version": version,
                           "hashes": [{"alg": "SHA-256", "content": file_sha256(p)} for p in arts.values()]}]}
    a, b = stage / f"assay-engine-{version}.spdx.json", stage / f"assay-engine-{version}.cdx.json"
    a.write_text(json.dumps(spdx, indent=1))
    b.write_text(json.dumps(cdx, indent=1))
    return a, b


def _subjects(entries: list[dict]) -> list[dict]:
    return [{"name": Path(e["path"]).name, "digest": {"sha256": e["sha256"]}} for e in entries]


def build_release(root: str | Path, *, version: str = "1.2.3", state: str = "published",
                  key_dir: str | Path | None = None, candidate: dict | None = None,
                  wheel_members: dict[str, str | bytes] | None = None) -> SyntheticRelease:
    """Write a complete release directory at `root` in `state` ("ready" or "published")."""
    root = Path(root)
    key_dir = Path(key_dir) if key_dir else root.parent / f".{root.name}-signing-key"
    key_path, _ = keys.ensure_local_key(key_dir)
    priv = keys.load_private_key(key_path)
    cand = candidate or candidate_record(version)
    ref = candidate_ref(cand)
    stage = root.parent / f".{root.name}-stage"
    stage.mkdir(parents=True, exist_ok=True)
    wheel = make_wheel(stage / f"assay_engine-{version}-py3-none-any.whl", version, wheel_members)
    sdist = make_sdist(stage / f"assay_engine-{version}.tar.gz", version)
    spdx, cdx = make_sboms(stage, version, {"wheel": wheel, "sdist": sdist})

    rd = ReleaseDir(root)
    m = mf.new_manifest(version, ref)
    cand_entry = rd.add_candidate(cand)
    r_cand = rd.add_receipt("candidate", sign_receipt(
        "candidate", [{"name": "candidate", "digest": {"sha256": ref["id"], "gitCommit": COMMIT}}], cand, priv))
    m = mf.transition(m, "candidate", candidate_record=cand_entry, public_key=rd.add_public_key(priv.public_key()),
                      receipts=[r_cand])
    arts = [rd.add_artifact(wheel, "wheel"), rd.add_artifact(sdist, "sdist")]
    sboms = [rd.add_sbom(spdx, "spdx-2.3"), rd.add_sbom(cdx, "cyclonedx-1.5")]
    sums = rd.write_sums()
    receipts = [r_cand]
    for label in ("a", "b"):
        pred = {"buildDefinition": {"buildType": "https://assay.dev/build/wheel-sdist/v1",
                                    "externalParameters": {"candidate": ref, "targets": ["wheel", "sdist"]},
                                    "internalParameters": {"environment": {"python": "3.11"}, "varied": {"umask": "022" if label == "a" else "077"}},
                                    "resolvedDependencies": [{"uri": "git+engine", "digest": {"gitCommit": COMMIT}}]},
                "runDetails": {"builder": {"id": f"https://assay.dev/builders/{label}"},
                               "metadata": {"invocationId": f"build-{label}", "startedOn": T0, "finishedOn": T1},
                               "byproducts": []}}
        receipts.append(rd.add_receipt("build", sign_receipt("build", _subjects(arts), pred, priv), label))
    files = [{"name": Path(a["path"]).name, "a_sha256": a["sha256"], "b_sha256": a["sha256"], "identical": True,
              "differences": []} for a in arts]
    repro = {"candidate": ref, "builds": ["a", "b"], "verdict": "reproducible", "files": files,
             "difference_count": 0, "waived": [], "unexplained": 0}
    receipts.append(rd.add_receipt("reproducibility", sign_receipt("reproducibility", _subjects(arts), repro, priv)))
    lane = {"candidate": ref, "lane": "h200", "host": "gpu-lane-1",
            "artifact": {"name": Path(arts[0]["path"]).name, "sha256": arts[0]["sha256"]}, "verdict": "pass",
            "phases": [{"name": "install", "status": "pass", "started_at": T0, "ended_at": T1, "facts": {"exit_code": 0}}],
            "window": {"lease": {"holder": "assay"}, "restored": True, "restore_diff": []}}
    receipts.append(rd.add_receipt("lane", sign_receipt("lane", _subjects(arts[:1]), lane, priv), "h200"))
    acc = {"candidate": ref, "label": "window-1", "host": "gpu-lane-1",
           "assets": [{"name": Path(a["path"]).name, "sha256": a["sha256"]} for a in arts], "verdict": "pass",
           "routes": [{"name": "pip-install-wheel", "status": "pass", "started_at": T0, "ended_at": T1, "facts": {}}],
           "window": {"lease": None, "opened_at": T0, "closed_at": T1, "held_s": 600, "max_hold_s": 1800,
                      "restored": True, "restore_diff": []}}
    receipts.append(rd.add_receipt("acceptance", sign_receipt("acceptance", _subjects(arts), acc, priv)))
    ledger = add_item(new_ledger(ref, review_id="review-1", base="0" * 40, seats=[{"role": "reviewer"}]),
                      id="R1", title="bounds check in the decode kernel", priority="P2")
    ledger = close(ledger, by="release-manager", statement="no blocking items", at=T1)
    waiver = build_waiver(ref, id="lane-latency-p99", scope="lane", subject="h200/latency-p99",
                          measured="p99 +3.1% (bound +3%)", approved_by="oncall-lead", reason="known noisy lane")
    m = mf.update(m, artifacts=arts, sboms=sboms, sums=sums, receipts=receipts,
                  ledger=rd.add_ledger(ledger), waivers=[rd.add_waiver(waiver)])
    m = mf.transition(m, "ready")
    if state == "published":
        appr = approval_mod.build_approval(m, decision="approve", approver="release-manager", allowed_approvers=APPROVERS,
                                           reason="all gates green", acknowledged_waivers=["lane-latency-p99"],
                                           flow_run_id="flow-run-1", decided_at=T1)
        env = sign_receipt("approval", approval_mod.approval_subjects(appr), appr, priv)
        m = mf.transition(m, "published", approval=rd.add_approval(env, appr, appr["manifest_sha256"]))
    elif state != "ready":
        raise ValueError(f"state must be ready or published, not {state!r}")
    rd.write_manifest(m, priv)
    roles = {"artifact": arts[0]["path"], "artifact-sdist": arts[1]["path"], "sbom": sboms[0]["path"],
             "sbom-cdx": sboms[1]["path"], "sums": "SHA256SUMS", "manifest.sig": "manifest.sig",
             "manifest.json": "manifest.json", "candidate.json": "candidate.json", "ledger": "ledger.json",
             "waiver": "waivers/lane-latency-p99.json", "public-key": "keys/release.pub.pem"}
    roles.update({f"receipt-{r['kind']}{'-' + r['label'] if r['label'] else ''}": r["path"] for r in receipts})
    if state == "published":
        roles["receipt-approval"] = m["approval"]["path"]
    return SyntheticRelease(root, version, priv, priv.public_key(), key_path, cand, ref, m, roles)
