"""Dispatching a lane to a work pool, against a real Prefect server: the lane's keys in assay.toml,
the qualify-lane deployment registered on the pool, and the dispatcher failing closed (no pool,
a child run that fails, a timeout) with an error naming lane, pool and child run. A worker that
stops heartbeating is tested end to end (tests/e2e/test_lane_dispatch.py)."""

from __future__ import annotations

import uuid
from uuid import UUID

import pytest

from flows.config import ConfigError, load_config
from flows.errors import LaneDispatchFailed, LaneDispatchTimedOut
from tests.flows.test_config import BASE

DISPATCHED = BASE.replace('host = "local"\n', 'host = "gpu-node1"\nwork_pool = "gpu-node1"\ndispatch_timeout_s = 900\n')


def _load(tmp_path, text):
    path = tmp_path / "assay.toml"
    path.write_text(text)
    return load_config(path)


def test_a_lane_names_its_pool_and_gates_never_sees_the_flow_keys(tmp_path):
    cfg = _load(tmp_path, DISPATCHED)
    (lane,) = cfg.lanes
    assert (lane.work_pool, lane.dispatch_timeout_s, lane.host) == ("gpu-node1", 900, "gpu-node1")
    assert cfg.lane_table("cpu-smoke") == {"name": "cpu-smoke", "kind": "cpu-smoke", "host": "gpu-node1"}
    assert cfg.lane_spec("cpu-smoke").chain[-1] == "restore"
    assert _load(tmp_path, BASE).lanes[0].work_pool is None


@pytest.mark.parametrize("change, pointer, words", [
    (('work_pool = "gpu-node1"', 'work_pool = "no pool!"'), "/lanes/0/work_pool", "does not match"),
    (("dispatch_timeout_s = 900", "dispatch_timeout_s = 1"), "/lanes/0/dispatch_timeout_s", "less than the minimum"),
    (('work_pool = "gpu-node1"\n', ""), "/lanes/0", "'work_pool' is a dependency of 'dispatch_timeout_s'"),
])
def test_bad_dispatch_keys_are_refused_naming_the_key(tmp_path, change, pointer, words):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, DISPATCHED.replace(*change))
    assert err.value.key_path == pointer and words in err.value.message


@pytest.mark.slow
def test_a_missing_pool_fails_before_anything_is_sent(prefect_api):
    from flows.dispatch import deployment_for

    with pytest.raises(LaneDispatchFailed) as err:
        deployment_for("no-such-pool", "cpu-smoke")
    assert str(err.value).startswith("lane cpu-smoke on work pool no-such-pool: no such work pool")
    assert "docs/LANES.md" in str(err.value)


def _pool_and_child(pool: str) -> str:
    """A pool with no worker, the qualify-lane deployment on it, and a child run waiting there."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments import run_deployment

    from flows.dispatch import deployment_for

    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
    name = deployment_for(pool, "cpu-smoke")
    assert name == f"qualify-lane/{pool}"
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(name)
    assert deployment.work_pool_name == pool and deployment.entrypoint == "flows.qualify.qualify_lane"
    child = run_deployment(name, timeout=0, parameters={"lane": {}, "candidate": {}, "store": {}, "wheel_key": "k",
                                                        "wheel_sha256": "s"})
    return str(child.id)


@pytest.mark.slow
def test_no_worker_in_time_is_a_timeout_and_the_child_is_cancelled(prefect_api):
    from flows.dispatch import watch
    from flows.runs import state_of

    pool = f"idle-{uuid.uuid4().hex[:6]}"
    child = _pool_and_child(pool)
    with pytest.raises(LaneDispatchTimedOut) as err:
        watch(child, lane="cpu-smoke", pool=pool, timeout_s=2, poll_s=0.5, say=lambda line: None)
    assert str(err.value) == (f"lane cpu-smoke on work pool {pool}, flow run {child}: not done within "
                              "dispatch_timeout_s=2s (still SCHEDULED); the run was cancelled")
    assert state_of(child)[0] == "CANCELLED"


@pytest.mark.slow
def test_a_child_run_that_fails_fails_the_dispatch(prefect_api):
    from prefect.client.orchestration import get_client
    from prefect.states import Failed

    from flows.dispatch import watch

    pool = f"failing-{uuid.uuid4().hex[:6]}"
    child = _pool_and_child(pool)
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(UUID(child), Failed(message="DispatchedWheelAltered: the wheel differs"), force=True)
    with pytest.raises(LaneDispatchFailed) as err:
        watch(child, lane="cpu-smoke", pool=pool, timeout_s=60, poll_s=0.5, say=lambda line: None)
    assert type(err.value) is LaneDispatchFailed
    assert str(err.value) == (f"lane cpu-smoke on work pool {pool}, flow run {child}: the run on the lane host "
                              "ended Failed: DispatchedWheelAltered: the wheel differs")
