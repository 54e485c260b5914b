"""Runs a dead worker left behind: give them back to the pool, as Prefect's own retry does.

A process worker that dies (kill -9, a lost machine) takes the flow run it was running with it,
and nothing tells the server: the run stays RUNNING (or PENDING) with the dead worker's name as
its `prefect.worker.name` label. Whoever starts the next worker knows the old one is gone (its
pid file is stale, flows/services.py), so it marks each such run CRASHED, saying why, and
schedules it again, which is what `prefect flow-run retry` does to a crashed run. A worker picks
it up; the flow body runs again with the same flow run id and workspace, and every step that had
finished is a cached result (flows/results.py): only the unfinished step is done again.

A run suspended for approval holds no worker and is left alone: `assay approve` schedules it."""

from __future__ import annotations

from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType,
                                            WorkPoolFilter, WorkPoolFilterName)
from prefect.client.schemas.objects import StateType
from prefect.states import Crashed, Scheduled

WORKER_LABEL = "prefect.worker.name"
HELD = [StateType.RUNNING, StateType.PENDING]  # states in which a run needs its worker alive


def orphaned_runs(pool: str, dead_worker: str) -> list[dict]:
    """The runs on `pool` that `dead_worker` took and left RUNNING or PENDING: id, name, state."""
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=HELD))),
            work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[pool])), limit=200)
    return [{"id": str(r.id), "name": r.name, "deployment_id": str(r.deployment_id) if r.deployment_id else None,
             "state": r.state.type.value} for r in runs if (r.labels or {}).get(WORKER_LABEL) == dead_worker]


def retry_orphaned(pool: str, dead_worker: str, say=lambda line: None) -> list[str]:
    """Mark each run `dead_worker` left CRASHED, then schedule it again; return their ids."""
    retried = []
    with get_client(sync_client=True) as client:
        for run in orphaned_runs(pool, dead_worker):
            run_id = UUID(run["id"])
            client.set_flow_run_state(run_id, Crashed(message=f"its worker {dead_worker} died"), force=True)
            client.set_flow_run_state(run_id, Scheduled(message=f"retried: its worker {dead_worker} died"), force=True)
            say(f"flow run {run['name']} ({run['id']}) was {run['state']} on worker {dead_worker}, which died: "
                "retried, its finished steps are kept")
            retried.append(run["id"])
    return retried
