"""The steps a candidate walks, in the order it walks them. Each task calls one library function,
stages what it produced through the ReleaseStager (releases/stage.py) and shows one artifact;
the release, nightly and qualify flows share the build and the lane steps."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path

from prefect import get_run_logger, task
from prefect.runtime import task_run
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from builders import compare, kernels, oci_image, provenance, recipe, reproduce, resolved_deps, sbom, snapshot, variations
from builders.incumbent import resolve_incumbent
from builders.wheel_meta import read_wheel
from flows import build_hosts, judged_evidence, lane_evidence, release_assets, summaries
from flows.image_base import image_base
from flows.config import Config, Lane
from flows.results import PERSISTED
from flows.errors import GateFailed, LaneFailed, LaneHardwarePending, NotReproducible, StagedReleaseInvalid
from flows.gpu_slot import gpu_slot
from flows.hostmap import host_for
from flows.stores import open_store, store_location
from flows.workspace import Workspace
from gates.judged import lane as judged_lane
from gates.qualify import qualify
from hosts.errors import HostLost
from hosts.local import LocalHost
from releases import keys
from releases.candidate import candidate_ref
from releases.canonical import file_sha256, load_json_bytes
from releases.ledger import ledger_summary, load_ledger_file
from releases.receipts import subject
from releases.release_dir import read_json
from releases.signers import build_signers
from releases.stage import ReleaseStager


def stager(cfg: Config, ws: Workspace) -> ReleaseStager:
    """The run's release, signed with the local release key (created 0600 on first use)."""
    staged, created = ReleaseStager.open(ws.root, cfg.keys_dir)
    if created:
        get_run_logger().info("Created a release signing key (Ed25519, mode 0600) in %s", cfg.keys_dir)
    return staged


def wheel_of(build) -> Path:
    return next(p for p in build.artifacts if p.suffix == ".whl")


def private_markers(cfg: Config, ws: Workspace) -> list[str]:
    """The configured markers, and this run's own build and state paths: a shipped file or a public
    record that holds one leaked where it was built."""
    paths = {ws.build_root(cfg.build_hosts), str(cfg.state_dir.resolve()), str(cfg.source.resolve())}
    return cfg.private_markers + sorted(p for p in paths if p.count("/") >= 2)


def _artifact_key(name: str) -> str:
    """Prefect artifact keys are lower-case letters, digits and dashes."""
    return "".join(c if c.isalnum() else "-" for c in name.lower())[:60]


@task(name="freeze candidate", **PERSISTED)
def freeze_candidate(cfg: Config, ws: Workspace, ref: str, allow_dirty: bool) -> dict:
    """Freeze REF's engine subdirectory into the candidate record and stage it."""
    record = snapshot.freeze(cfg.source, ref=ref, subdir=cfg.subdir, allow_dirty=allow_dirty,
                             version_label=cfg.version_label)
    cand_ref = stager(cfg, ws).add_candidate(record)
    create_markdown_artifact(key="candidate", markdown=summaries.candidate_md(record, cand_ref),
                             description="The frozen candidate")
    return record


@task(name="build twice", **PERSISTED)
def build_twice(cfg: Config, ws: Workspace, candidate: dict, stage: bool = True, image: bool = True):
    """Export the candidate's source and build it on both build hosts; stage the build receipts.
    IMAGE=False: no engine image even when `[build] image` asks for one (the nightly rebuild, whose
    outputs are checked against a release's SHA256SUMS, where the image is not)."""
    log = get_run_logger()
    ws.clear_build()  # what a build killed part-way left (a finished build is a cached result: never here)
    snapshot.export_source(cfg.source, candidate, ws.source)
    with build_hosts.opened(cfg, log=log.info) as bh:
        builds = recipe.build_twice(*bh.hosts, candidate, ws.source, ws.build_root(cfg.build_hosts),
                                    timeout=cfg.build_timeout_s, local_dir=ws.root / "artifacts",
                                    python_a=bh.pythons[0], python_b=bh.pythons[1], placements=bh.placements,
                                    kernel_archs=cfg.kernel_archs, image_base=image_base(cfg, log.info) if image else None,
                                    source_uri=provenance.repository_uri(cfg.source, cfg.source_uri),
                                    progress=lambda label, stream, text: log.info("build %s: %s", label, text.rstrip()))
    if stage:
        staged = stager(cfg, ws)
        for build in builds:
            staged.add_receipt("build", build.subjects, build.record, label=build.label)
    create_table_artifact(key="builds", table=summaries.builds_table(builds), description="Both builds' artifacts")
    return builds


@task(name="compare builds", **PERSISTED)
def compare_builds(cfg: Config, ws: Workspace, candidate: dict, builds, waivers: list[dict]) -> dict:
    """Compare build a with build b member by member, bisect each difference to the variation that
    causes it and keep diffoscope's reports as evidence; stage the reproducibility receipt."""
    log = get_run_logger()
    a, b = builds
    record = compare.compare(a.artifacts[0].parent, b.artifacts[0].parent, candidate, waivers=waivers)
    evidence = ws.root / "evidence" / "reproducibility"
    # The build hosts (a build-host container among them) are started again only to bisect a difference.
    with build_hosts.opened(cfg, log=log.info) if record["difference_count"] else nullcontext() as bh:
        rebuild = bh and reproduce.Rebuild(*bh.hosts, candidate, ws.source, ws.build_root(cfg.build_hosts),
                                           ws.root / "bisection", *bh.pythons, cfg.build_timeout_s,
                                           kernel_archs=cfg.kernel_archs)
        record = reproduce.explain(record, builds, rebuild, variations.NAMES, evidence, say=log.info)
    subjects = [subject(f["name"], f["a_sha256"]) for f in record["files"] if f["a_sha256"]]
    stager(cfg, ws).add_receipt("reproducibility", subjects, record)
    create_markdown_artifact(key="reproducibility", markdown=summaries.reproducibility_md(record),
                             description="Build a vs build b")
    for e in record.get("evidence", []):
        create_link_artifact(key=f"diffoscope-{_artifact_key(e['artifact'])}"[:60],
                             link=(evidence / e["html"]["name"]).as_uri(),
                             description=f"diffoscope report of {e['artifact']} (sha256 {e['html']['sha256']})")
    if record["verdict"] == "not_reproducible":
        raise NotReproducible(f"the two builds differ in {record['difference_count']} place(s) and no waiver "
                              "names them; see the reproducibility artifact")
    return record


@task(name="package artifacts, SBOMs and sums", **PERSISTED)
def package_release(cfg: Config, ws: Workspace, candidate: dict, builds) -> None:
    """Stage build a's artifacts (wheel, sdist, AOT kernels), the installer zipapp, the quickstart
    users follow after installing (the acceptance window runs its blocks), both SBOMs of the wheel
    and SHA256SUMS."""
    staged = stager(cfg, ws)
    # The engine image is a build artifact, compared and bound in the build receipts, but not a
    # release asset (docs/REPRODUCIBILITY.md, The engine image: why it is not shipped yet).
    entries = [staged.add_artifact(p, kernels.artifact_kind(p.name)) for p in builds[0].artifacts
               if not p.name.endswith(oci_image.SUFFIX)]
    entries += [staged.add_artifact(p, kind) for p, kind in release_assets.shipped_with(candidate, ws.root / "assets")]
    kernels_tar = next((p for p in builds[0].artifacts if p.name.endswith(kernels.SUFFIX)), None)
    resolved = lane_dependency_versions(cfg, wheel_of(builds[0]))
    for fmt, path in sbom.write_sboms(wheel_of(builds[0]), candidate, ws.root / "sbom", kernels=kernels_tar,
                                      resolved=resolved).items():
        entries.append(staged.add_sbom(path, fmt))
    staged.write_sums()
    create_table_artifact(key="artifacts", table=summaries.assets_table(entries), description="Release assets")


def lane_dependency_versions(cfg: Config, wheel: Path) -> dict | None:
    """The wheel's dependencies as installed beside the interpreter the first local lane reuses
    (gates/install.py), i.e. the versions that lane qualifies; None when no lane runs here."""
    lane = next((ln for ln in cfg.lanes if ln.host == "local" and not ln.evidence), None)
    if lane is None:
        return None
    names = [d.name for d in read_wheel(wheel).dependencies]
    return resolved_deps.resolve(LocalHost("local"), sys.executable, names)


def _lost_host(task, task_run, state) -> bool:
    """Retry a lane only when its host was lost (the retry resumes at the first unpassed phase);
    a phase that failed on a live host is a verdict, not a fault to retry."""
    return isinstance(state.result(raise_on_failure=False), HostLost)


def _local_key(cfg: Config):
    """A lane run in the release run signs as the pipeline, with its local key."""
    return keys.load_private_key(keys.ensure_local_key(cfg.keys_dir)[0])


def _stage_signed(cfg: Config, ws: Workspace, receipts, key) -> None:
    """Stage receipts a lane signed with `key`, each as it is."""
    staged = stager(cfg, ws)
    for kind, label, path in receipts:
        staged.add_signed_receipt(kind, load_json_bytes(path.read_bytes(), where=path.name), label,
                                  signer=key.public_key())


@task(name="qualify lane", **PERSISTED, retries=1, retry_condition_fn=_lost_host)
def qualify_lane(cfg: Config, ws: Workspace, candidate: dict, lane: Lane, wheel: Path, stage: bool = True) -> dict:
    """Run the lane's phase chain in one window on its host (its GPU slot held); stage every phase
    receipt and the lane receipt that binds them."""
    log = get_run_logger()
    host = host_for(cfg, lane.host)
    local_key = _local_key(cfg)
    with gpu_slot(lane.gpu, lane.host):
        result = qualify(host, cfg.lane_spec(lane.name), candidate, wheel, ws.lane(lane.name), key=local_key,
                         resume=task_run.run_count > 1 or ws.lane_interrupted(lane.name), progress=lambda line: log.info("lane %s: %s", lane.name, line))
    if stage:
        _stage_signed(cfg, ws, result.receipts, local_key)
    create_table_artifact(key=f"lane-{_artifact_key(lane.name)}", table=summaries.lane_table(result.record),
                          description=f"Lane {lane.name}: {result.verdict}")
    if result.verdict != "pass":
        raise LaneFailed(summaries.lane_failure(result.record))
    return result.record


@task(name="bind lane evidence", **PERSISTED)
def bind_lane_evidence(cfg: Config, ws: Workspace, lane: Lane, wheel: Path) -> dict:
    """A lane qualified elsewhere: bind its evidence when it qualifies these wheel bytes (every
    signature under the lane's pinned key, its chain complete and passed), else record the lane
    hardware-pending, which stops the run unless the lane is optional (docs/LANES.md, Lane evidence)."""
    status, evidence = lane_evidence.resolve(cfg, lane, file_sha256(wheel))
    signer, staged = keys.load_public_key(lane.public_key), stager(cfg, ws)
    if status == lane_evidence.BOUND:
        entry = staged.add_lane_evidence(evidence, signer, optional=lane.optional)
    else:
        entry = staged.add_lane_pending(evidence, signer, optional=lane.optional,
                                        reason=lane_evidence.pending_reason(evidence, wheel))
    create_markdown_artifact(key=f"lane-{_artifact_key(lane.name)}", markdown=summaries.lane_evidence_md([entry]),
                             description=f"Lane {lane.name}: {entry['status']}")
    if status != lane_evidence.BOUND and not lane.optional:
        raise LaneHardwarePending(f"lane {lane.name} is hardware-pending: {entry['reason']}; the lane is not "
                                  "optional, so the release is not ready")
    get_run_logger().info("lane %s: %s (evidence of wheel %s)", lane.name, entry["status"], entry["wheel_sha256"][:16])
    return entry


@task(name="judged gates", **PERSISTED)
def judge_lane(cfg: Config, ws: Workspace, candidate: dict, lane: Lane, wheel: Path, waivers: list[dict],
               stage: bool = True) -> dict:
    """Judge the candidate against the incumbent on the lane (ABBA speed, quality screen, determinism,
    TTFT parity) from the lane's measurements, taken now or reused for the same bytes (flows/judged_evidence.py);
    stage the four verdicts."""
    log = get_run_logger()
    say = lambda line: log.info("lane %s: %s", lane.name, line)  # noqa: E731
    inc = resolve_incumbent(cfg.incumbent, repo_dir=cfg.source, state_dir=cfg.state_dir, store=open_store(cfg),
                            subdir=cfg.subdir, progress=say)
    measured, reused = judged_evidence.measure(cfg, ws, lane, candidate["package"]["version"], wheel, inc)
    if reused:
        say(f"judging the measurements kept as evidence {measured['evidence_sha256'][:16]} (measured in run "
            f"{measured['measured_in_run']}, same wheels, lane and gate sizes)")
    local_key = _local_key(cfg)
    result = judged_lane.judge_evidence(measured, lane.name, candidate_ref(candidate), wheel, inc.wheel, inc.identity,
                                        ws.lane(lane.name) / "judged", key=local_key, lane_gates=lane.gates,
                                        waivers=[w for w in waivers if w.get("scope") == "gate"])
    if stage:
        _stage_signed(cfg, ws, result.receipts, local_key)
    create_table_artifact(key=f"judged-{_artifact_key(lane.name)}", table=summaries.verdicts_table(result.verdicts),
                          description=f"Judged gates on {lane.name} against incumbent {inc.identity['version']}")
    if result.blocking:
        raise GateFailed(summaries.gate_failure(lane.name, result.blocking))
    return {kind: v["verdict"] for kind, v in result.verdicts.items()}


@task(name="compose manifest", **PERSISTED)
def compose_release(cfg: Config, ws: Workspace, waivers: list[dict], acceptance_lanes: list[str] | None = None,
                    incumbent: dict | None = None) -> dict:
    """draft -> candidate -> ready over everything staged, binding the reviewers' ledger (closed)
    and the waivers, and (second compose) the lanes whose acceptance window is required and the
    incumbent whose upgrade rehearsal is; returns the approval summary."""
    staged = stager(cfg, ws)
    ref = candidate_ref(staged.candidate)
    ledger = load_ledger_file(cfg.review_ledger, ref) if cfg.review_ledger else None
    signers = build_signers(ref, approvers=cfg.approver_keys, grantors=cfg.waiver_grantors,
                            allow_unsigned_approval=cfg.allow_unsigned_approval, lanes=cfg.lane_keys)
    manifest = staged.compose(waivers=waivers, ledger=ledger, signers=signers,
                              acceptance_lanes=acceptance_lanes or [], incumbent=incumbent)
    lanes = [staged.predicate(r) for r in manifest["receipts"] if r["kind"] == "lane"]
    summary = summaries.manifest_md(manifest, ledger_summary(read_json(staged.root / manifest["ledger"]["path"])),
                                    lanes)
    create_markdown_artifact(key="manifest", markdown=summary, description="The ready manifest")
    return {"manifest": manifest, "summary": summary}


@task(name="verify release directory", **PERSISTED)
def verify_staged(cfg: Config, ws: Workspace) -> None:
    """`assay verify --require-ready` on the staged directory, against the release key."""
    report = stager(cfg, ws).verify(require_ready=True, private_markers=private_markers(cfg, ws))
    create_markdown_artifact(key="verify", markdown=summaries.verify_md(report),
                             description="assay verify --require-ready on the staged release")
    if not report.ok:
        raise StagedReleaseInvalid(f"the staged release does not verify: {summaries.verify_failure(report)}")


def check_decision(cfg: Config, ws: Workspace, decision: dict, run_id: str) -> dict:
    """What record_approval will check, without signing: the approval gate asks it before it lets a
    decision through, so that a refused one pauses the run again instead of failing it."""
    return stager(cfg, ws).check_decision(decision, allowed_approvers=cfg.approvers, flow_run_id=run_id,
                                          approver_keys=cfg.approver_keys, allow_unsigned=cfg.allow_unsigned_approval)


@task(name="record approval", **PERSISTED)
def record_approval(cfg: Config, ws: Workspace, decision: dict, run_id: str) -> dict:
    """Check the approver, the acknowledged waivers and the approver's signature (where the config
    asks for one), and sign the decision (approve or reject) into the release."""
    approval = stager(cfg, ws).record_approval(decision, allowed_approvers=cfg.approvers, flow_run_id=run_id,
                                               approver_keys=cfg.approver_keys,
                                               allow_unsigned=cfg.allow_unsigned_approval)
    create_markdown_artifact(key="approval", markdown=summaries.approval_md(approval.record),
                             description="The approval decision")
    return approval.record


@task(name="publish release", **PERSISTED)
def publish_release(cfg: Config, ws: Workspace) -> dict:
    """Upload the approved release write-once: assets first, manifest last, verified after."""
    log = get_run_logger()
    store = open_store(cfg)
    result = stager(cfg, ws).publish(store, progress=lambda key, done, total: log.info("uploaded %d/%d: %s",
                                                                                        done, total, key),
                                     private_markers=private_markers(cfg, ws))
    location = store_location(store, result.version)
    ws.write_summary(result.version, location)
    create_link_artifact(key="published", link=location if location.startswith("s3://") else Path(location).as_uri(),
                         description=f"Published release {result.version}")
    return {"version": result.version, "location": location}
