"""Reading flow runs from the Prefect API, for `assay runs`, `make run` and the tests."""

from __future__ import annotations

import time
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
from prefect.client.schemas.objects import StateType
from prefect.client.schemas.sorting import FlowRunSort

TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def recent_runs(limit: int = 20, state: str | None = None) -> list[dict]:
    """Most recent first. Runs that are only scheduled (the nightly's future runs) are listed when
    asked for with state=SCHEDULED; otherwise they would crowd out the runs that happened."""
    if state:
        types = FlowRunFilterStateType(any_=[StateType(state.upper())])
    else:
        types = FlowRunFilterStateType(not_any_=[StateType.SCHEDULED])
    flt = FlowRunFilter(state=FlowRunFilterState(type=types))
    with get_client(sync_client=True) as client:
        flow_runs = client.read_flow_runs(flow_run_filter=flt, sort=FlowRunSort.START_TIME_DESC, limit=limit)
        flows = {f.id: f.name for f in client.read_flows()}
        deployments = {d.id: d.name for d in client.read_deployments()}
    return [{
        "id": str(run.id),
        "flow": flows.get(run.flow_id, str(run.flow_id)),
        "deployment": deployments.get(run.deployment_id) if run.deployment_id else None,
        "name": run.name,
        "state": run.state.type.value if run.state else "UNKNOWN",
        "state_name": run.state.name if run.state else "UNKNOWN",
        "message": run.state.message if run.state else None,
        "started": run.start_time.isoformat() if run.start_time else None,
    } for run in flow_runs]


def state_of(flow_run_id: str) -> tuple[str, str | None]:
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(flow_run_id))
    if not run.state:
        return "UNKNOWN", None
    return run.state.type.value, run.state.message


class LogFollower:
    """The log lines of one flow run (its tasks' included) not yet seen, oldest first."""

    def __init__(self, flow_run_id: str) -> None:
        self.flow_run_id = UUID(flow_run_id)
        self.after = None
        self.seen: set = set()

    def new_lines(self) -> list[str]:
        from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId, LogFilterTimestamp
        from prefect.client.schemas.sorting import LogSort

        flt = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[self.flow_run_id]),
                        timestamp=LogFilterTimestamp(after_=self.after) if self.after else None)
        with get_client(sync_client=True) as client:
            logs = client.read_logs(log_filter=flt, sort=LogSort.TIMESTAMP_ASC, limit=200)
        lines = []
        for log in logs:
            if log.id in self.seen:  # `after_` is inclusive: the last second's lines come again
                continue
            self.seen.add(log.id)
            self.after = log.timestamp
            lines.append(log.message)
        return lines


def wait_for_state(flow_run_id: str, wanted: set[str], timeout_s: float, poll_s: float = 2.0,
                   on_change=None, on_poll=None) -> str:
    """Poll until the run reaches one of `wanted` (or any terminal state); return that state.
    `on_poll()` runs at every poll (make run prints the run's progress from it)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        if on_poll:
            on_poll()
        state, message = state_of(flow_run_id)
        if state != last and on_change:
            on_change(state, message)
        last = state
        if state in wanted or state in TERMINAL:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"flow run {flow_run_id} still {state} after {timeout_s:.0f}s")
        time.sleep(poll_s)
