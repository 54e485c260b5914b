"""The human approval gate: a typed Prefect RunInput, the pause that waits for it, and the resume
that `assay approve` sends."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Literal
from uuid import UUID

from prefect import get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run, resume_flow_run
from prefect.input import RunInput
from pydantic import Field


class Approval(RunInput):
    """What a person decides on the paused run, in the UI form or through `assay approve`."""

    decision: Literal["approve", "reject"] = Field(description="approve publishes; reject ends the run Failed")
    approver: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$",
                          description="who decides; must be listed in assay.toml [release].approvers")
    reason: str = Field(min_length=1, max_length=2000, description="why, for the release record")
    acknowledged_waivers: list[str] = Field(default_factory=list,
                                            description="ids of every waiver bound to this candidate")
    signature: dict[str, Any] | None = Field(
        default=None, description="the approver's DSSE envelope over this decision and the ready manifest's "
                                  "digest (`assay approve --key` makes it); without one the approval is recorded "
                                  "as unsigned, and accepted only where assay.toml allows unsigned approvals")


class ApprovalNotPossible(Exception):
    """The run cannot take an approval now (not paused, unknown id)."""


def wait_for_approval(summary_markdown: str, timeout_s: int, poll_s: int, approvers: list[str],
                      on_refused=None, check: Callable[[Approval], None] | None = None) -> Approval:
    """Pause the current flow run until an Approval from a listed approver arrives.

    An approval from anyone else, or one that `check` refuses (raising releases.errors.ApprovalRefused:
    a bad or missing signature), is refused and the run pauses again for the time that is left, so that
    nobody off the list can end a release either way. FlowPauseTimeout when time runs out."""
    from releases.errors import ApprovalRefused

    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        attempt += 1
        remaining = int(deadline - time.monotonic())
        if remaining <= 0:
            raise FlowPauseTimeout("the approval gate timed out")
        form = Approval.with_initial_data(description=summary_markdown)
        decision = pause_flow_run(wait_for_input=form, timeout=remaining, poll_interval=min(poll_s, remaining),
                                  key=f"approval-{attempt}")
        if decision.approver in approvers:
            try:
                if check is not None:
                    check(decision)
                return decision
            except ApprovalRefused as exc:
                get_run_logger().warning("Refused the %s from %r: %s; waiting again", decision.decision,
                                         decision.approver, exc)
        if on_refused:
            on_refused(decision)


def ready_manifest_path(flow_run_id: str) -> Path:
    """The ready manifest a paused run staged, when its workspace is on this machine (where
    `assay approve` can read it to sign its digest); ApprovalNotPossible otherwise."""
    from flows.config import ConfigError, load_config
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(UUID(flow_run_id))
        cfg = load_config((run.parameters or {}).get("config"))
    except (ValueError, ConfigError) as exc:
        raise ApprovalNotPossible(f"cannot find the ready manifest of run {flow_run_id}: {exc}; "
                                  "give it with --manifest FILE") from None
    except Exception as exc:  # the API's not-found and connection errors alike: say which run
        raise ApprovalNotPossible(f"cannot read flow run {flow_run_id}: {exc}") from None
    path = cfg.work_dir / f"run-{flow_run_id}" / "release" / "manifest.json"
    if not path.is_file():
        raise ApprovalNotPossible(f"run {flow_run_id} staged no manifest here ({path} is absent); "
                                  "give the ready manifest.json with --manifest FILE")
    return path


def send_approval(flow_run_id: str, approval: dict) -> None:
    """Resume a paused run with the approval input, as the UI form does."""
    from prefect.client.orchestration import get_client
    from pydantic import ValidationError

    try:
        Approval(**approval)  # the flow validates again; this only fails early and locally
    except ValidationError as exc:
        raise ApprovalNotPossible(f"invalid approval: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    try:
        run_id = UUID(flow_run_id)
    except ValueError:
        raise ApprovalNotPossible(f"{flow_run_id!r} is not a flow run id") from None
    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(run_id)
    except Exception as exc:  # the API's not-found and connection errors alike: say which run
        raise ApprovalNotPossible(f"cannot read flow run {flow_run_id}: {exc}") from None
    state = run.state.type.value if run.state else "UNKNOWN"
    if state != "PAUSED":
        raise ApprovalNotPossible(f"flow run {flow_run_id} is {state}, not PAUSED: nothing awaits an approval")
    _check_listed(run.parameters or {}, approval["approver"])
    resume_flow_run(run_id, run_input=approval)


def _check_listed(parameters: dict, approver: str) -> None:
    """Refuse early when the run's configuration is readable here and does not list the approver.
    The flow checks again: it is the authority, this only spares a round trip."""
    from flows.config import ConfigError, load_config

    try:
        cfg = load_config(parameters.get("config"))
    except ConfigError:
        return  # the run's config lives elsewhere; the flow will judge
    if approver not in cfg.approvers:
        raise ApprovalNotPossible(f"approver {approver!r} is not listed in {cfg.file} [release].approvers "
                                  f"({', '.join(cfg.approvers)})")
