"""A lane on a worker of its work pool: `[[lanes]] work_pool = "..."` makes the release run hand
the lane to the deployment `qualify-lane/<pool>` with run_deployment instead of running it itself.

The wheel goes to the lane host, and the receipts come back, through the store's staging area
(flows/lane_staging.py); the receipts are verified before the stager binds any. The run fails
closed: a missing pool, a child run that ends FAILED, CRASHED or CANCELLED, a worker that stops
heartbeating, or no result within the lane's dispatch_timeout_s each raise a LaneDispatchFailed
naming the lane, the pool and the child run, and nothing after the lanes (compose, approval,
publish) runs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run
from prefect.states import Cancelled, Cancelling, Crashed

from flows import summaries
from flows.config import Config, Lane
from flows.errors import LaneDispatchFailed, LaneDispatchTimedOut, LaneFailed, LaneReceiptsRefused, LaneWorkerLost
from flows.results import PERSISTED
from flows.lane_staging import check_returned, read_returned, receipts_prefix, wheel_key
from flows.steps import stager
from flows.stores import open_store
from flows.workspace import Workspace
from releases import keys
from releases.candidate import candidate_ref

FLOW = "qualify-lane"
# Prefect's own rule for an offline worker: three heartbeat intervals without one.
HEARTBEAT_MISSES = 3
ENDED = {"FAILED", "CRASHED", "CANCELLED"}


def deployment_for(pool: str, lane: str) -> str:
    """Register (or refresh) the qualify-lane deployment on `pool`, named after the pool; return
    its "flow/deployment" name. The entrypoint is a module path: a worker imports the installed
    `assay` package, wherever its checkout or site-packages lies on the lane host."""
    from prefect.deployments.runner import EntrypointType

    from flows.qualify import qualify_lane

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            raise LaneDispatchFailed("no such work pool on the Prefect server; create it and start a worker on "
                                     "the lane host (docs/LANES.md, Lanes on Prefect workers)", lane=lane, pool=pool) from None
    qualify_lane.to_deployment(name=pool, work_pool_name=pool, entrypoint_type=EntrypointType.MODULE_PATH,
                               tags=["lane"], description=f"Lanes dispatched to work pool {pool}.").apply()
    return f"{FLOW}/{pool}"


def expected_key(cfg: Config, lane: Lane | None = None):
    """The key a lane host's receipts must verify with: the lane's pinned key (`public_key`), else
    the release key, which the lane host then signs with as ASSAY_LANE_KEY (as a local lane signs as
    the pipeline)."""
    if lane is not None and lane.public_key:
        return keys.load_public_key(lane.public_key)
    return keys.load_private_key(keys.ensure_local_key(cfg.keys_dir)[0]).public_key()


@task(name="dispatch lane", **PERSISTED)
def dispatch_lane(cfg: Config, ws: Workspace, candidate: dict, lane: Lane, wheel: Path) -> dict:
    """Run the lane on a worker of its work pool; verify and stage the receipts it sends back."""
    log = get_run_logger()
    pool = lane.work_pool
    run_id = str(flow_run.get_id() or ws.root.name)
    store = open_store(cfg)
    key = wheel_key(run_id, lane.name, wheel.name)
    sha = store.put_file(key, wheel)
    child = run_deployment(deployment_for(pool, lane.name), timeout=0, flow_run_name=f"{lane.name}-{run_id[:8]}",
                           parameters={"lane": cfg.lane_table(lane.name), "candidate": candidate, "store": cfg.store,
                                       "wheel_key": key, "wheel_sha256": sha})
    child_id = str(child.id)
    log.info("lane %s: dispatched to work pool %s as flow run %s", lane.name, pool, child_id)
    watch(child_id, lane=lane.name, pool=pool, timeout_s=lane.dispatch_timeout_s,
          say=lambda line: log.info("lane %s: %s", lane.name, line))
    signer = expected_key(cfg, lane)
    returned = check_returned(read_returned(store, receipts_prefix(key, child_id)), lane=lane.name, kind=lane.kind,
                              chain=cfg.lane_spec(lane.name).chain, candidate=candidate_ref(candidate),
                              wheel={"name": wheel.name, "sha256": sha}, key=signer)
    if returned.problems:
        raise LaneReceiptsRefused("the receipts it sent back are refused, nothing of them is bound: "
                                  + "; ".join(returned.problems[:5]), lane=lane.name, pool=pool, flow_run_id=child_id)
    staged = stager(cfg, ws)
    for kind, label, envelope in returned.receipts:
        staged.add_signed_receipt(kind, envelope, label, signer=signer)
    record = returned.record
    create_table_artifact(key=f"lane-{lane.name}", table=summaries.lane_table(record),
                          description=f"Lane {lane.name} on work pool {pool}: {returned.verdict}")
    if returned.verdict != "pass":
        raise LaneFailed(summaries.lane_failure(record))
    return record


@dataclass
class _Heartbeat:
    """When a worker's last heartbeat changed, by this machine's monotonic clock (no clock skew
    between this machine, the server and the lane host enters the judgement)."""
    seen: object = None
    since: float = 0.0


def watch(child_id: str, *, lane: str, pool: str, timeout_s: float, poll_s: float = 2.0, say=print) -> None:
    """Wait for the child run to complete; raise (typed, naming lane, pool and run) when it ends
    otherwise, when its worker stops heartbeating, or at the timeout. A lost or late child run is
    marked CRASHED or cancelled on the server, so that a worker coming back does not run it on."""
    deadline = time.monotonic() + timeout_s
    beat, last_state = _Heartbeat(), None
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(UUID(child_id))
            state = run.state.type.value if run.state else "SCHEDULED"
            if state != last_state:
                say(f"flow run {child_id} is {run.state.name if run.state else state}")
                last_state = state
            if state == "COMPLETED":
                return
            if state in ENDED:
                raise LaneDispatchFailed(f"the run on the lane host ended {run.state.name}: {run.state.message}",
                                         lane=lane, pool=pool, flow_run_id=child_id)
            worker = (run.labels or {}).get("prefect.worker.name")
            silent = _silent_for(client, pool, worker, beat) if worker else None
            if silent is not None:
                message = (f"worker {worker} stopped heartbeating ({silent}); the lane's host is lost, "
                           "nothing it ran is bound")
                client.set_flow_run_state(UUID(child_id), Crashed(message=message), force=True)
                raise LaneWorkerLost(message, lane=lane, pool=pool, flow_run_id=child_id)
            if time.monotonic() > deadline:
                message = f"not done within dispatch_timeout_s={timeout_s:g}s (still {state}); the run was cancelled"
                client.set_flow_run_state(UUID(child_id), (Cancelling if state == "RUNNING" else Cancelled)(
                    message=message), force=True)
                raise LaneDispatchTimedOut(message, lane=lane, pool=pool, flow_run_id=child_id)
            time.sleep(poll_s)


def _silent_for(client, pool: str, worker: str, beat: _Heartbeat) -> str | None:
    """None while `worker` heartbeats; else how long it has been silent."""
    found = [w for w in client.read_workers_for_work_pool(pool) if w.name == worker]
    now = time.monotonic()
    if not found:
        return "it is no longer registered with the pool"
    interval = found[0].heartbeat_interval_seconds or 30
    if found[0].last_heartbeat_time != beat.seen:
        beat.seen, beat.since = found[0].last_heartbeat_time, now
        return None
    silent = now - beat.since
    return f"no heartbeat for {silent:.0f}s, its interval is {interval}s" if silent > HEARTBEAT_MISSES * interval else None
