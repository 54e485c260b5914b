"""release-candidate: one commit of the engine's source to a verified, approved, published release.

freeze -> build twice -> compare -> package -> qualify each lane (or bind its evidence) -> compose
(ready) -> stage, then each `acceptance = true` lane's acceptance window (and the upgrade rehearsal
when a release is already published) -> compose again, requiring them -> verify
-> approval gate (suspend for a typed Approval) -> record the decision -> publish write-once.

Every step's result persists and is cached by its inputs (flows/results.py): a run resumed after
the approval gate, or retried after its worker died, runs this body again from the top and only
the unfinished step does work."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.runtime import flow_run

from flows import acceptance_steps, dispatch, steps
from flows.approval import wait_for_approval
from flows.config import load_config
from flows.errors import ReleaseRejected
from flows.stores import open_store
from flows.workspace import Workspace
from releases.canonical import load_json_bytes
from releases.errors import PublishRefused


@flow(name="release-candidate", log_prints=True, persist_result=True)
def release_candidate(config: str | None = None, ref: str = "HEAD", allow_dirty: bool = False,
                      waivers: list[str] | None = None, approval_timeout_s: int | None = None) -> dict:
    """Build, reproduce, qualify and (once approved) publish the engine at `ref`.

    config: an assay.toml (default: the embedded defaults); waivers: waiver record files to bind;
    approval_timeout_s: how long the gate waits before the run fails (default from the config)."""
    log = get_run_logger()
    cfg = load_config(config)
    run_id = str(flow_run.get_id() or "local")
    ws = Workspace.for_run(cfg, run_id)
    waiver_records = [load_json_bytes(Path(p).read_bytes(), where=p) for p in waivers or []]

    candidate = steps.freeze_candidate(cfg, ws, ref, allow_dirty)
    version = candidate["release_version"]
    if _published_elsewhere(cfg, ws, version):
        raise PublishRefused(f"release {version} is already published; a published release is never replaced",
                             key=f"{version}/manifest.json")
    builds = steps.build_twice(cfg, ws, candidate)
    steps.compare_builds(cfg, ws, candidate, builds, waiver_records)
    steps.package_release(cfg, ws, candidate, builds)
    for lane in cfg.lanes:
        if lane.evidence:   # qualified elsewhere: bound by the wheel's digest, or hardware-pending
            steps.bind_lane_evidence(cfg, ws, lane, steps.wheel_of(builds[0]))
            continue
        run_lane = dispatch.dispatch_lane if lane.work_pool else steps.qualify_lane  # a worker on the lane host
        run_lane(cfg, ws, candidate, lane, steps.wheel_of(builds[0]))
        if lane.gates:
            steps.judge_lane(cfg, ws, candidate, lane, steps.wheel_of(builds[0]), waiver_records)
    ready = steps.compose_release(cfg, ws, waiver_records)
    accepting = [lane for lane in cfg.lanes if lane.acceptance]
    if accepting:   # the composed release, staged and served, accepted on each lane's host; then composed again
        staged = acceptance_steps.stage_for_acceptance(cfg, ws)
        for lane in accepting:
            acceptance_steps.acceptance_window(cfg, ws, lane, staged)
        incumbent = acceptance_steps.incumbent_of(cfg)
        if incumbent is not None:
            acceptance_steps.upgrade_rehearsal(cfg, ws, incumbent, staged, accepting[0])
        ready = steps.compose_release.with_options(name="compose manifest (accepted)")(
            cfg, ws, waiver_records, acceptance_lanes=[lane.name for lane in accepting], incumbent=incumbent)
    steps.verify_staged(cfg, ws)

    log.info("Release %s is ready and waits for approval (approvers: %s)", version, ", ".join(cfg.approvers))
    fields = {"decision", "approver", "reason", "acknowledged_waivers", "signature"}
    try:
        decision = wait_for_approval(ready["summary"], approval_timeout_s or cfg.approval_timeout_s,
                                     cfg.approval_poll_s, cfg.approvers,
                                     on_refused=lambda d: log.warning(
                                         "Refused a %s from %r: not listed in [release].approvers; waiting again",
                                         d.decision, d.approver),
                                     check=lambda d: steps.check_decision(cfg, ws, d.model_dump(include=fields), run_id))
    except FlowPauseTimeout:
        raise FlowPauseTimeout(f"no approval for {version} within the timeout; nothing was published") from None
    approval = steps.record_approval(cfg, ws, decision.model_dump(include=fields), run_id)
    if approval["decision"] != "approve":
        raise ReleaseRejected(f"{approval['approver']} rejected {version}: {approval['reason']}")
    return steps.publish_release(cfg, ws)


def _published_elsewhere(cfg, ws: Workspace, version: str) -> bool:
    """The store holds `version` already, and not as this very run published it (a run whose worker
    died after its publish, retried, finds its own manifest there and goes on to its cached result)."""
    store = open_store(cfg)
    key = f"{version}/manifest.json"
    if not store.exists(key):
        return False
    mine = ws.release / "manifest.json"
    return not (mine.is_file() and mine.read_bytes() == store.read_bytes(key))
