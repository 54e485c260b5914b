"""The human approval gate: a typed Prefect RunInput, the suspend that waits for it, and the resume
that `assay approve` sends.

A run from a deployment SUSPENDS (Prefect's suspend_flow_run): its process exits and no worker is
held while a person decides; the resume schedules the run again, a worker runs its flow body from
the top, every step before the gate is a cached result (flows/results.py), and suspend_flow_run
with the same key returns the input that was sent. A run without a deployment (a flow called in
a process, as the tests and scripts do) has nothing to reschedule it: it pauses, and waits in
its process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Literal
from uuid import UUID

from prefect import get_run_logger, task
from prefect.cache_policies import INPUTS
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run, resume_flow_run, suspend_flow_run
from prefect.input import RunInput
from prefect.runtime import deployment, flow_run
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


@task(name="approval deadline", persist_result=True, cache_policy=INPUTS)
def approval_deadline(run_id: str, timeout_s: int) -> float:
    """When the gate stops waiting (epoch seconds), fixed the first time the run reaches the gate:
    a resumed or retried run keeps the deadline it had."""
    return time.time() + timeout_s


def _await_input(form, remaining: int, poll_s: int, key: str) -> Approval:
    """Suspend a run that a worker can pick up again; pause one that only its own process can resume."""
    if deployment.id:
        return suspend_flow_run(wait_for_input=form, timeout=remaining, key=key)
    return pause_flow_run(wait_for_input=form, timeout=remaining, poll_interval=min(poll_s, remaining), key=key)


def wait_for_approval(summary_markdown: str, timeout_s: int, poll_s: int, approvers: list[str],
                      on_refused=None, check: Callable[[Approval], None] | None = None) -> Approval:
    """Suspend (or pause, see above) the current flow run until an Approval from a listed approver arrives.

    An approval from anyone else, or one that `check` refuses (raising releases.errors.ApprovalRefused:
    a bad or missing signature), is refused and the run waits again for the time that is left, so that
    nobody off the list can end a release either way. Each wait has its own key (approval-1, -2, ...):
    a resumed run replays the decisions already sent, in order, and waits at the first unanswered
    one. FlowPauseTimeout when time runs out in a paused run; a suspended run has no process to
    notice: the server's pause-expiration service fails it at its timeout ("never resumed")."""
    from releases.errors import ApprovalRefused

    deadline = approval_deadline(str(flow_run.get_id() or "local"), timeout_s)
    attempt = 0
    while True:
        attempt += 1
        remaining = int(deadline - time.time())
        if remaining <= 0:
            raise FlowPauseTimeout("the approval gate timed out")
        form = Approval.with_initial_data(description=summary_markdown)
        decision = _await_input(form, remaining, poll_s, key=f"approval-{attempt}")
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
    expires = run.state.state_details.pause_timeout
    if expires is not None and expires.timestamp() < time.time():
        # Timed out, and the server's pause-expiration service has not failed it yet: this resume does.
        try:
            resume_flow_run(run_id, run_input=approval)
        except Exception:  # the server refuses the late resume either way; the run's state says the rest
            pass
        raise ApprovalNotPossible(f"flow run {flow_run_id} waited for approval until {expires.isoformat()} and timed "
                                  "out: it is failed now and nothing was published (start a new run)")
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
