"""release-candidate: one commit of the engine's source to a verified, approved, published release.

freeze -> build twice -> compare -> package -> qualify each lane -> compose (ready) -> verify
-> approval gate (pause for a typed Approval) -> publish write-once."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.runtime import flow_run

from flows.approval import wait_for_approval
from flows.config import load_config
from flows.release_tasks import compose_manifest, publish, record_approval, summary_markdown
from flows.stores import open_store
from flows.tasks import build_twice, compare_builds, freeze_candidate, package_release, qualify_lane, verify_staged, wheel_of
from flows.workspace import Workspace
from releases.errors import PublishRefused


class ReleaseRejected(Exception):
    """The approver rejected the candidate: the run fails and nothing is published."""


def _load_waivers(paths: list[str]) -> list[dict]:
    return [json.loads(Path(p).read_text()) for p in paths]


@flow(name="release-candidate", log_prints=True)
def release_candidate(config: str | None = None, ref: str = "HEAD", allow_dirty: bool = False,
                      waivers: list[str] | None = None, approval_timeout_s: int | None = None) -> dict:
    """Build, reproduce, qualify and (once approved) publish the engine at `ref`.

    config: an assay.toml (default: the embedded defaults); waivers: waiver record files to bind;
    approval_timeout_s: how long the gate waits before the run fails (default from the config)."""
    log = get_run_logger()
    cfg = load_config(config)
    run_id = str(flow_run.get_id() or "local")
    ws = Workspace.for_run(cfg, run_id)
    waiver_records = _load_waivers(waivers or [])

    candidate = freeze_candidate(cfg, ws, ref, allow_dirty)
    version = candidate["release_version"]
    if open_store(cfg).exists(f"{version}/manifest.json"):
        raise PublishRefused(f"release {version} is already published; a published release is never replaced")
    builds = build_twice(cfg, ws, candidate)
    compare_builds(cfg, ws, candidate, builds, waiver_records)
    packaged = package_release(cfg, ws, candidate, builds)
    wheel = wheel_of(builds[0])
    for lane in cfg.lanes:
        qualify_lane(cfg, ws, candidate, lane, wheel)
    manifest = compose_manifest(cfg, ws, candidate, packaged, waiver_records)
    verify_staged(ws, require_ready=True)

    log.info("Release %s is ready and waits for approval (approvers: %s)", version, ", ".join(cfg.approvers))

    def refused(decision) -> None:
        log.warning("Refused a %s from %r: not listed in [release].approvers; waiting again",
                    decision.decision, decision.approver)

    try:
        decision = wait_for_approval(summary_markdown(manifest), approval_timeout_s or cfg.approval_timeout_s,
                                     cfg.approval_poll_s, cfg.approvers, on_refused=refused)
    except FlowPauseTimeout:
        raise FlowPauseTimeout(f"no approval for {version} within the timeout; nothing was published") from None
    approval = record_approval(cfg, ws, manifest, decision.model_dump(include={"decision", "approver", "reason",
                                                                                "acknowledged_waivers"}), run_id)
    if approval["record"]["decision"] != "approve":
        raise ReleaseRejected(f"{approval['record']['approver']} rejected {version}: {approval['record']['reason']}")
    return publish(cfg, ws, manifest, approval)
