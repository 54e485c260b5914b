"""The release-candidate tasks. Each calls into the library and publishes a Prefect artifact that
summarises the record it produced; none holds logic of its own beyond that glue."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from builders import compare as compare_mod
from builders import recipe, sbom, snapshot
from flows.config import Config, Lane
from flows.gpu_slot import gpu_slot
from flows.hostmap import host_for
from flows.workspace import Workspace
from gates.lane import run_lane
from releases import keys, receipts
from releases.candidate import candidate_ref
from releases.release_dir import ReleaseDir
from releases.verify import verify_release


def wheel_of(build) -> Path:
    return next(p for p in build.artifacts if p.suffix == ".whl")


def _key(cfg: Config):
    path, created = keys.ensure_local_key(cfg.keys_dir)
    if created:
        get_run_logger().info("Created a release signing key (Ed25519, mode 0600) at %s", path)
    return keys.load_private_key(path)


def _subject(name: str, sha256: str) -> dict:
    return {"name": name, "digest": {"sha256": sha256}}


def _key_name(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()[:60]


@task(name="freeze candidate")
def freeze_candidate(cfg: Config, ws: Workspace, ref: str, allow_dirty: bool) -> dict:
    record = snapshot.freeze(cfg.source, ref=ref, subdir=cfg.subdir, allow_dirty=allow_dirty)
    if cfg.raw["release"].get("version_label", "commit") == "commit" and "+" not in record["release_version"]:
        record["release_version"] = f"{record['release_version']}+g{record['commit'][:12]}"
    ref_ = candidate_ref(record)
    rd = ReleaseDir(ws.release)
    rd.add_candidate(record)
    rd.add_receipt("candidate", receipts.sign_receipt(
        "candidate", [_subject(f"{record['source']['name']}@{record['commit']}:{record['source']['subdir']}", ref_["id"])],
        record, _key(cfg)))
    snapshot.export_source(cfg.source, record, ws.source)
    create_markdown_artifact(key="candidate", description="The frozen candidate", markdown=(
        f"### Candidate {record['release_version']}\n\n| field | value |\n|---|---|\n"
        f"| commit | `{record['commit']}` |\n| tree ({record['source']['subdir']}) | `{record['tree']}` |\n"
        f"| source date | {record['source_date_epoch']} |\n| dirty | {record['dirty']} |\n| id | `{ref_['id']}` |\n"))
    return record


@task(name="build twice")
def build_twice(cfg: Config, ws: Workspace, candidate: dict):
    log = get_run_logger()
    host_a, host_b = (host_for(cfg, name) for name in cfg.build_hosts)
    results = recipe.build_twice(host_a, host_b, candidate, ws.source, ws.build_root(cfg.build_hosts),
                                 timeout=cfg.build_timeout_s, local_dir=ws.root / "artifacts",
                                 python_a=cfg.build_pythons[0], python_b=cfg.build_pythons[1],
                                 progress=lambda label, stream, text: log.info("build %s: %s", label, text.rstrip()))
    rd, key = ReleaseDir(ws.release), _key(cfg)
    rows = []
    for result in results:
        rd.add_receipt("build", receipts.sign_receipt("build", result.subjects, result.record, key), label=result.label)
        rows += [{"build": result.label, "artifact": s["name"], "sha256": s["digest"]["sha256"]} for s in result.subjects]
    create_table_artifact(key="builds", table=rows, description="Both builds' artifacts")
    return results


@task(name="compare builds")
def compare_builds(cfg: Config, ws: Workspace, candidate: dict, builds, waivers: list[dict]) -> dict:
    a, b = builds
    record = compare_mod.compare(a.artifacts[0].parent, b.artifacts[0].parent, candidate, waivers=waivers)
    subjects = [_subject(f["name"], f["a_sha256"]) for f in record["files"] if f["a_sha256"]]
    ReleaseDir(ws.release).add_receipt("reproducibility", receipts.sign_receipt("reproducibility", subjects, record, _key(cfg)))
    lines = [f"### Reproducibility: {record['verdict']}\n", "| file | identical | differences |", "|---|---|---|"]
    for f in record["files"]:
        diffs = "; ".join(f"{d['member'] or '(file)'}: {d['kind']} ({d['detail']})" for d in f["differences"][:20])
        lines.append(f"| {f['name']} | {f['identical']} | {diffs or '-'} |")
    create_markdown_artifact(key="reproducibility", markdown="\n".join(lines), description="Build a vs build b")
    if record["verdict"] == "not_reproducible":
        raise RuntimeError(f"the two builds differ in {record['difference_count']} place(s) and no waiver names them; "
                           "see the reproducibility artifact")
    return record


@task(name="package artifacts, SBOMs and sums")
def package_release(cfg: Config, ws: Workspace, candidate: dict, builds) -> dict:
    rd = ReleaseDir(ws.release)
    entries = {"artifacts": [], "sboms": []}
    for path in builds[0].artifacts:
        entries["artifacts"].append(rd.add_artifact(path, "wheel" if path.suffix == ".whl" else "sdist"))
    wheel = wheel_of(builds[0])
    for fmt, path in sbom.write_sboms(wheel, candidate, ws.root / "sbom").items():
        entries["sboms"].append(rd.add_sbom(path, fmt))
    entries["sums"] = rd.write_sums()
    create_table_artifact(key="artifacts", description="Release assets",
                          table=[{"path": e["path"], "sha256": e["sha256"]} for e in entries["artifacts"] + entries["sboms"]])
    return entries


@task(name="qualify lane")
def qualify_lane(cfg: Config, ws: Workspace, candidate: dict, lane: Lane, wheel: Path) -> dict:
    log = get_run_logger()
    host = host_for(cfg, lane.host)
    with gpu_slot(lane.gpu, lane.host):
        record = run_lane(host, lane.name, lane.kind, candidate_ref(candidate), candidate["package"]["version"], wheel,
                          workdir=str(ws.lane(lane.name)), base_python=cfg.lane_python(lane),
                          lease_path=cfg.lease_path(lane), model=lane.model, state_dir=ws.lane(lane.name),
                          progress=lambda line: log.info("lane %s: %s", lane.name, line))
    subjects = [_subject(record["artifact"]["name"], record["artifact"]["sha256"])]
    ReleaseDir(ws.release).add_receipt("lane", receipts.sign_receipt("lane", subjects, record, _key(cfg)), label=lane.name)
    create_table_artifact(key=f"lane-{_key_name(lane.name)}", description=f"Lane {lane.name}: {record['verdict']}",
                          table=[{"phase": p["name"], "status": p["status"], "seconds": p["facts"].get("seconds")}
                                 for p in record["phases"]])
    if record["verdict"] != "pass":
        raise RuntimeError(f"lane {lane.name} verdict {record['verdict']}: "
                           + "; ".join(f"{p['name']}: {p['facts'].get('reason', p['status'])}"
                                       for p in record["phases"] if p["status"] not in ("pass", "skipped")))
    return record


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@task(name="verify release directory")
def verify_staged(ws: Workspace, require_ready: bool = True) -> dict:
    report = verify_release(ws.release, require_ready=require_ready)
    create_markdown_artifact(key="verify", description="assay verify --require-ready on the staged release",
                             markdown=f"### verify: {'OK' if report.ok else 'FAILED'}\n\n"
                             + "\n".join(f"- `{f.file}` {f.field}: {f.message}" for f in report.failures))
    if not report.ok:
        raise RuntimeError("the staged release does not verify: "
                           + "; ".join(f"{f.file} {f.field}: {f.message}" for f in report.failures[:10]))
    return {"ok": True, "state": report.state}
