"""A release run survives its worker, from a checkout under a home directory.

One run of the release-candidate deployment on a real process worker (flows/services.py), with
the cpu-smoke lane on the tiny model. Its worker is killed with SIGKILL, together with everything
it started (as when its machine dies), three times: during the build, during the lane, and while
the run waits for approval (suspended: no process of the run is left to kill). After each death a
new worker is started and the runs the dead one left are retried (flows/recovery.py), as
`make run` does; the approval is sent to the suspended run with no worker up at all. The release
is published exactly once and verifies; the build and the lane each ran to completion once, and
every later pass over the flow body found them cached.

The checkout (the engine's git clone), the state root and the store all lie under
`<tmp>/home/someone/assay`: the private-path scan (releases/markers.py) refuses any record that
carries a path of that form, so a record still holding an absolute host path fails the publish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from uuid import UUID

import psutil
import pytest
from prefect import flow

from flows.runs import LogFollower, state_of, wait_for_state
from flows.services import start_worker
from tests.e2e.test_release_candidate import ASSAY, _approve, _published_versions, write_config

pytestmark = pytest.mark.slow


def _kill_tree(pid: int) -> list[int]:
    """SIGKILL the worker and every process under it (its flow run, builds, engine servers)."""
    root = psutil.Process(pid)
    procs = [root] + root.children(recursive=True)
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)
    return [p.pid for p in procs]


class Workers:
    """Process workers on one pool, started as `make run` starts them; each killed or stopped at the end."""

    def __init__(self, env: dict, pool: str, tmp: Path, results: Path):
        self.env, self.pool, self.tmp, self.results = env, pool, tmp, results
        self.current = None
        self.started = []

    def start(self):
        n = len(self.started)
        self.current = start_worker(Path(self.env["PREFECT_HOME"]), self.tmp / "run", self.env["PREFECT_API_URL"],
                                    self.pool, self.tmp, self.tmp / f"worker-{n}.log", results=self.results,
                                    env={"PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_WORKER_HEARTBEAT_SECONDS": "5"})
        self.started.append(self.current)
        return self.current

    def kill(self) -> list[int]:
        killed = _kill_tree(self.current.pid)
        return killed

    def logs(self) -> str:
        return "\n".join((self.tmp / f"worker-{i}.log").read_text(errors="replace")[-3000:]
                         for i in range(len(self.started)))

    def stop_all(self) -> None:
        for service in self.started:
            if psutil.pid_exists(service.pid):
                _kill_tree(service.pid)


@pytest.fixture
def home_checkout(engine_repo, tmp_path):
    """A clone of the engine repository at <tmp>/home/someone/assay, with its state and store there."""
    root = tmp_path / "home" / "someone" / "assay"
    root.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", str(engine_repo), str(root)], check=True, timeout=120)
    config = write_config(root, root)
    # The retried lane waits out the dead run's lease before it may break it: 10 s here, not 120.
    config.write_text(config.read_text() + "\n[lanes.qualify]\nlease_stale_s = 10\n")
    text = config.read_text()
    assert str(tmp_path) in text and "/home/someone/assay" in text
    return root, config


@pytest.fixture
def workers(prefect_api, tmp_path):
    pool = f"faults-{uuid.uuid4().hex[:6]}"
    created = subprocess.run([sys.executable, "-m", "prefect", "work-pool", "create", pool,
                              "--type", "process"], env={**os.environ, **prefect_api}, capture_output=True,
                             text=True, timeout=120)
    assert created.returncode == 0, created.stdout + created.stderr
    group = Workers(prefect_api, pool, tmp_path, tmp_path / "results")
    try:
        yield group
    finally:
        group.stop_all()


def _deploy(pool: str, flow=None) -> str:
    """Deploy `flow` (default: the release flow) to `pool` by module path, as flows/dispatch.py does."""
    from prefect.deployments.runner import EntrypointType

    from flows.release_candidate import release_candidate

    flow = flow or release_candidate
    flow.to_deployment(name=pool, work_pool_name=pool, entrypoint_type=EntrypointType.MODULE_PATH).apply()
    return f"{flow.name}/{pool}"


@flow(name="approval-suspend-test", persist_result=True)
def approval_gate(config: str, timeout_s: int) -> dict:
    """The release flow's approval gate alone (no build): what it returns is the decision it got."""
    from flows.approval import wait_for_approval
    from flows.config import load_config

    cfg = load_config(config)
    return wait_for_approval("a ready release", timeout_s, 1, cfg.approvers).model_dump(include={"decision", "approver"})


def _wait_for_line(follower: LogFollower, run_id: str, needle: str, seen: list[str], timeout_s: float = 1500) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(needle in line for line in seen):
        assert time.monotonic() < deadline, f"no {needle!r} in the run's log:\n" + "\n".join(seen[-40:])
        state = state_of(run_id)[0]
        assert state not in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}, f"{state}:\n" + "\n".join(seen[-40:])
        seen += follower.new_lines()
        time.sleep(1)


def _wait_for_process(workers: Workers, run_id: str, argv_part: list[str], timeout_s: float = 900) -> None:
    """Until a process under the current worker has `argv_part` in its command line."""
    deadline = time.monotonic() + timeout_s
    while True:
        for proc in psutil.Process(workers.current.pid).children(recursive=True):
            try:
                cmdline = proc.cmdline()
            except psutil.NoSuchProcess:
                continue
            if all(part in cmdline for part in argv_part):
                return
        assert time.monotonic() < deadline, f"no process {argv_part} under the worker:\n{workers.logs()}"
        assert state_of(run_id)[0] not in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}, workers.logs()
        time.sleep(0.2)


def _wait_for_no_children(workers: Workers, timeout_s: float) -> None:
    """Until the current worker has no process under it; fails naming what is still there."""
    deadline = time.monotonic() + timeout_s
    while children := psutil.Process(workers.current.pid).children(recursive=True):
        if time.monotonic() > deadline:
            left = []
            for proc in children:
                try:
                    left.append(" ".join(proc.cmdline())[:200])
                except psutil.NoSuchProcess:
                    pass
            raise AssertionError(f"a suspended run holds no process under its worker, {timeout_s:.0f} s on: {left}")
        time.sleep(0.5)


def _task_states(run_id: str) -> dict[str, list[str]]:
    """Each task's runs in this flow run, by the name of the state each ended in (Completed, Cached ...)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(run_id)])),
                                     limit=200)
    found: dict[str, list[str]] = {}
    for run in runs:
        found.setdefault(run.name.rsplit("-", 1)[0], []).append(run.state.name if run.state else "?")
    return found


def _restart_and_retry(workers: Workers, run_id: str) -> None:
    from flows.recovery import retry_orphaned

    dead = workers.current.worker
    workers.start()
    assert retry_orphaned(workers.pool, dead) == [run_id]
    assert state_of(run_id)[0] == "SCHEDULED"


def test_killed_worker_during_build_lane_and_approval_publishes_once(prefect_api, home_checkout, workers):
    from prefect.deployments import run_deployment

    root, config = home_checkout
    workers.start()
    run = run_deployment(_deploy(workers.pool), timeout=0, parameters={"config": str(config)})
    run_id = str(run.id)
    follower, seen = LogFollower(run_id), []

    # 1. The worker dies in the middle of a build (`python -m build` is running under it): the retry
    #    builds again from a clean folder. The log reaches the server in batches, too late to time this.
    _wait_for_process(workers, run_id, ["-m", "build", "--no-isolation"])
    workers.kill()
    assert state_of(run_id)[0] == "RUNNING"  # nothing told the server
    _restart_and_retry(workers, run_id)

    # 2. The worker dies in the middle of the lane: the retry keeps both builds (cached).
    _wait_for_line(follower, run_id, "lane cpu-smoke: phase protocol: running", seen)
    workers.kill()
    _restart_and_retry(workers, run_id)

    # 3. At the approval gate the run is suspended: its process has exited and holds no worker.
    state = wait_for_state(run_id, {"PAUSED"}, timeout_s=1500, poll_s=2)
    assert state == "PAUSED", f"{state}:\n" + "\n".join((seen + follower.new_lines())[-60:]) + workers.logs()
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        assert client.read_flow_run(UUID(run_id)).state.name == "Suspended"
    # The server shows PAUSED before the suspended run's process has finished exiting (it flushes its
    # logs and results first), which on loaded cores takes seconds: wait for it to go, within a bound.
    _wait_for_no_children(workers, timeout_s=120)
    killed = workers.kill()
    assert len(killed) == 1, f"a suspended run holds no process under its worker, found {killed}"
    sent = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "tests: worker faults")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert state_of(run_id)[0] == "SCHEDULED"  # resumed: waiting for a worker, none is up
    workers.start()
    state = wait_for_state(run_id, set(), timeout_s=900, poll_s=2)
    assert state == "COMPLETED", f"{state}:\n" + "\n".join((seen + follower.new_lines())[-60:]) + workers.logs()

    # Finished work was never redone: one completed build and lane, cached on every later pass.
    tasks = _task_states(run_id)
    assert tasks["build twice"].count("Running") == 1, tasks  # the one killed: nothing told the server
    assert tasks["build twice"].count("Completed") == 1, tasks
    assert tasks["build twice"].count("Cached") == 2, tasks  # after the lane's death, after the approval
    assert tasks["qualify lane"].count("Running") == 1, tasks
    assert tasks["qualify lane"].count("Completed") == 1, tasks
    assert tasks["qualify lane"].count("Cached") == 1, tasks
    seen += follower.new_lines()
    for phase in ("preflight", "install", "startup-fit"):  # passed before the lane's worker died: kept
        assert any(f"phase {phase}: passed earlier, kept" in line for line in seen), phase
    assert tasks["publish release"] == ["Completed"], tasks
    assert tasks["record approval"] == ["Completed"], tasks
    # The build killed part-way left nothing that stopped its retry; one workspace for the one run.
    assert [p.name for p in (root / "state" / "work").iterdir()] == [f"run-{run_id}"]

    # Published exactly once, and it verifies.
    versions = _published_versions(root)
    assert len(versions) == 1, versions
    release = versions[0]
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["state"] == "published" and manifest["approval"]["approver"] == "local-operator"
    verify = subprocess.run([ASSAY, "verify", "--require-ready", "--json", "--key",
                             str(root / "state" / "keys" / "release.pub.pem"), str(release)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["ok"] is True
    # No record of it names the home directory it was made in.
    for path in release.rglob("*"):
        if path.is_file() and path.suffix in {".json", ".md", ".html", ""}:
            assert "/home/someone" not in path.read_text(errors="replace"), path


def _gate_run(workers: Workers, tmp: Path, timeout_s: int) -> str:
    from prefect.deployments import run_deployment

    config = write_config(tmp, tmp)
    run = run_deployment(_deploy(workers.pool, approval_gate), timeout=0,
                         parameters={"config": str(config), "timeout_s": timeout_s})
    return str(run.id)


def _state_name(run_id: str) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(UUID(run_id)).state.name


def test_suspended_gate_holds_no_process_and_replays_refused_decisions(prefect_api, workers, tmp_path):
    """A refused decision (an approver off the list) suspends the run again under the next key; the
    listed approver's decision then resumes it, and the run replays both in order, on a new worker."""
    workers.start()
    run_id = _gate_run(workers, tmp_path, 600)
    assert wait_for_state(run_id, {"PAUSED"}, timeout_s=300, poll_s=1) == "PAUSED"
    assert _state_name(run_id) == "Suspended"
    deadline = time.monotonic() + 60
    while psutil.Process(workers.current.pid).children(recursive=True):  # the run's process exits
        assert time.monotonic() < deadline, "the suspended run's process did not exit"
        time.sleep(1)
    from prefect.flow_runs import resume_flow_run

    # Past `assay approve`'s own early check, as the UI form would send it: the flow must refuse it.
    resume_flow_run(UUID(run_id), run_input={"decision": "approve", "approver": "intruder", "reason": "not listed"})
    assert wait_for_state(run_id, {"PAUSED"}, timeout_s=300, poll_s=1) == "PAUSED"
    workers.kill()
    sent = _approve(prefect_api, run_id, "--as", "release-lead", "--reason", "tests: the second decision")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    workers.start()
    assert wait_for_state(run_id, set(), timeout_s=300, poll_s=1) == "COMPLETED", workers.logs()
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        result = client.read_flow_run(UUID(run_id)).state.result()
    assert result == {"decision": "approve", "approver": "release-lead"}
    assert "Refused the approve from 'intruder'" not in workers.logs()  # refused as unlisted, not by check
    assert _task_states(run_id)["approval deadline"].count("Cached") == 2  # one deadline for all three passes


def test_a_suspended_run_nobody_approves_fails_at_its_timeout(prefect_api, workers, tmp_path):
    """No process waits out a suspended run's timeout: the server's pause-expiration service fails it."""
    workers.start()
    run_id = _gate_run(workers, tmp_path, 5)
    assert wait_for_state(run_id, {"PAUSED"}, timeout_s=300, poll_s=1) == "PAUSED"
    assert wait_for_state(run_id, set(), timeout_s=120, poll_s=1) == "FAILED"
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        assert "never resumed" in client.read_flow_run(UUID(run_id)).state.message
    late = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "too late")
    assert late.returncode == 2 and "FAILED, not PAUSED" in late.stderr, late.stdout + late.stderr
