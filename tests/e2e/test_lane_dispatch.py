"""A lane dispatched to a Prefect worker on its lane host: the worker runs inside a test-bed
container (Debian bookworm, debootstrap), the release-candidate flow hands it `cpu-smoke` through
the deployment `qualify-lane/<pool>`, verifies the receipts it sends back, and publishes once
approved; killing the lane host mid-lane fails the run with LaneWorkerLost and publishes nothing."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from flows.runs import LogFollower, state_of, wait_for_state
from releases.canonical import load_json_bytes
from releases.keys import ensure_local_key
from tests.e2e.test_release_candidate import ASSAY, FlowProcess, _approve, write_config

pytestmark = [pytest.mark.slow, pytest.mark.docker]
ROOT = Path(__file__).resolve().parents[2]
LANE_HOME = "/var/lib/assay-lane"   # inside the container, on its own (writable) filesystem


def _lane_config(tmp: Path, repo: Path, pool: str, host: str) -> Path:
    """The e2e config with its cpu-smoke lane on `host` (the container's label), GPU `testbed`,
    dispatched to `pool`. Each test has its own host label, so its own GPU slot: a slot the killed
    lane host held stays taken until its Prefect lease expires."""
    config = write_config(tmp, repo)
    # The acceptance window runs from the release run on the lane's host, which a dispatched lane's
    # run does not reach (flows/config.py refuses the pair): this test qualifies through the worker only.
    text = config.read_text().replace("acceptance = true\n", "")
    assert text.count('host = "local"\n') == 1
    config.write_text(text.replace('host = "local"\n', f'host = "{host}"\ngpu = "testbed"\nwork_pool = "{pool}"\n'
                                                       "dispatch_timeout_s = 1200\n"))
    return config


class LaneHost:
    """A Prefect process worker on `pool`, alone in a test-bed container: the lane host.

    The image holds Debian's python3, not this project's interpreter and packages, so the pyenv
    interpreter prefix, the venv and this worktree are bind-mounted READ-ONLY at the paths they
    have here (the venv's interpreter is a link into the prefix; the venv's editable install points
    at the worktree). What the lane host writes goes to its own filesystem (ASSAY_LANE_HOME), and to
    the release store: a filesystem store, so its folder is mounted read-write, as a lane host
    would mount a shared store (an S3 store needs no mount). The release key folder is mounted
    read-only: the worker signs with it (ASSAY_LANE_KEY), as flows/dispatch.py expects. Host
    networking: the worker must reach the Prefect server, which listens on 127.0.0.1 only, and
    nothing in the container listens anywhere but on loopback (the lane's engine binds 127.0.0.1)."""

    def __init__(self, pool: str, api_url: str, store: Path, keys: Path, log: Path):
        import docker

        from hosts.rootfs_image import ensure_image

        client = docker.from_env(timeout=60)
        image = ensure_image(client, log=lambda *_: None)
        self.name = f"assay-lanehost-{uuid.uuid4().hex[:8]}"
        self.log = log
        ro = {p: {"bind": p, "mode": "ro"} for p in {sys.base_prefix, sys.prefix, str(ROOT), str(keys)}}
        self.container = client.containers.run(
            image, detach=True, name=self.name, network_mode="host", labels={"assay.testbed": "1"},
            volumes={**ro, str(store): {"bind": str(store), "mode": "rw"}},
            environment={"PREFECT_API_URL": api_url, "PREFECT_HOME": "/root/.prefect",
                         "PREFECT_WORKER_HEARTBEAT_SECONDS": "2", "PREFECT_WORKER_QUERY_SECONDS": "2",
                         "ASSAY_LANE_HOME": LANE_HOME, "ASSAY_LANE_KEY": str(keys / "release.key.pem")},
            command=[sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process",
                     "--name", self.name])

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")

    def kill(self) -> None:
        self.container.kill()

    def remove(self) -> None:
        self.log.write_text(self.logs())
        self.container.remove(force=True)


def _create_pool(env: dict, pool: str) -> None:
    created = subprocess.run([sys.executable, "-m", "prefect", "work-pool", "create", pool, "--type", "process"],
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stdout + created.stderr


@pytest.fixture
def lane_host(prefect_api, tmp_path):
    pool = f"lanes-{uuid.uuid4().hex[:6]}"
    _create_pool(prefect_api, pool)
    keys = tmp_path / "state" / "keys"
    ensure_local_key(keys)   # the release key, before the run: the lane host signs with it
    (tmp_path / "store").mkdir()
    host = LaneHost(pool, prefect_api["PREFECT_API_URL"], tmp_path / "store", keys, tmp_path / "lanehost.log")
    flows: list[FlowProcess] = []
    try:
        yield pool, host, f"tb-{uuid.uuid4().hex[:6]}", flows
    finally:
        for flow in flows:   # a test that failed part-way leaves no release run behind
            if flow.proc.poll() is None:
                flow.proc.kill()
        host.remove()


def _published(tmp: Path) -> list[Path]:
    """Version folders of the store: neither its .incoming/ nor the _staging/ area is a version."""
    return sorted(p for p in (tmp / "store").iterdir() if p.name[0] not in "._")


def _child_run(flow: FlowProcess, timeout_s: float = 1500) -> str:
    """The id of the lane's flow run on the worker, from the dispatching run's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(r"dispatched to work pool \S+ as flow run ([0-9a-f-]{36})", flow.log.read_text())
        if found:
            return found.group(1)
        assert flow.proc.poll() is None, f"the release run ended before dispatching:\n{flow.log.read_text()[-6000:]}"
        time.sleep(2)
    raise AssertionError("the lane was not dispatched in time")


def _active_slots(name: str) -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(name).active_slots


def test_dispatched_lane_is_verified_bound_and_published(prefect_api, engine_repo, tmp_path, lane_host):
    pool, host, label, flows = lane_host
    flow = FlowProcess(prefect_api, _lane_config(tmp_path, engine_repo, pool, label), f"e2e-dispatch-{os.getpid()}",
                       tmp_path / "flow.log")
    flows.append(flow)
    run_id = flow.run_id()
    child = _child_run(flow)
    state = wait_for_state(run_id, {"PAUSED"}, timeout_s=1500, poll_s=2)
    assert state == "PAUSED", f"{state}:\n{flow.log.read_text()[-6000:]}\n--- lane host:\n{host.logs()[-4000:]}"
    assert state_of(child)[0] == "COMPLETED"
    # The lane ran on the lane host, under the GPU slot named for that host's label, not "local".
    assert _active_slots(f"gpu-testbed-{label}") == 0
    assert f"holding the global concurrency slot gpu-testbed-{label}" in "\n".join(LogFollower(child).new_lines())
    sent = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "tests: dispatched lane")
    assert sent.returncode == 0, sent.stderr
    assert flow.wait(600) == 0, flow.log.read_text()[-6000:]

    (release,) = _published(tmp_path)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["state"] == "published"
    labels = sorted(r["label"] for r in manifest["receipts"] if r["kind"] in ("phase", "lane"))
    phases = ["benchmark", "install", "preflight", "protocol", "restart", "restore", "startup-fit"]
    assert labels == ["cpu-smoke"] + [f"cpu-smoke/{p}" for p in phases]
    lane = json.loads((release / "receipts" / "lane" / "cpu-smoke.dsse.json").read_text())
    predicate = load_json_bytes(base64.b64decode(lane["payload"]), where="lane")["predicate"]
    assert predicate["host"] == label and predicate["verdict"] == "pass"
    wheel = next((release / "artifacts").glob("*.whl"))
    assert predicate["artifact"]["name"] == wheel.name
    verify = subprocess.run([ASSAY, "verify", "--require-ready", "--json", "--key",
                             str(tmp_path / "state" / "keys" / "release.pub.pem"), str(release)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["ok"] is True


def test_killing_the_lane_host_mid_lane_fails_the_run_and_publishes_nothing(prefect_api, engine_repo_no_kernels,
                                                                             tmp_path, lane_host):
    pool, host, label, flows = lane_host
    flow = FlowProcess(prefect_api, _lane_config(tmp_path, engine_repo_no_kernels, pool, label), f"e2e-lost-{os.getpid()}",
                       tmp_path / "flow.log")
    flows.append(flow)
    run_id = flow.run_id()
    child = _child_run(flow)
    follower, seen = LogFollower(child), []
    deadline = time.monotonic() + 600
    while not any("phase protocol: running" in line for line in seen):
        assert time.monotonic() < deadline, "\n".join(seen[-30:]) + host.logs()[-4000:]
        assert state_of(child)[0] not in {"COMPLETED", "FAILED", "CRASHED"}, "\n".join(seen[-30:])
        seen += follower.new_lines()
        time.sleep(1)
    assert _active_slots(f"gpu-testbed-{label}") == 1   # mid-lane, the lane holds its host's GPU slot
    host.kill()
    assert flow.wait(300) != 0
    log = flow.log.read_text()
    lost = re.search(r"LaneWorkerLost: lane cpu-smoke on work pool (\S+), flow run (\S+): worker (\S+) stopped "
                     r"heartbeating", log)
    assert lost, log[-6000:]
    assert lost.group(1) == pool and lost.group(2) == child and lost.group(3) == host.name
    assert wait_for_state(run_id, set(), timeout_s=60) == "FAILED"
    assert state_of(child)[0] == "CRASHED"
    assert _published(tmp_path) == []
    assert "waits for approval" not in log   # nothing after the lanes ran: no compose, no approval gate
