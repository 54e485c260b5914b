"""The release-candidate flow end to end against a real Prefect server: real builds of the engine,
the cpu-smoke lane on the tiny model, the approval gate driven through `assay approve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.runs import recent_runs, wait_for_state

pytestmark = pytest.mark.slow
ASSAY = str(Path(sys.executable).with_name("assay"))


def write_config(tmp: Path, repo: Path, timeout_s: int = 1800) -> Path:
    cfg = tmp / "assay.toml"
    cfg.write_text(f"""
[release]
name = "e2e"
source = "{repo}"
subdir = "engine"
approvers = ["local-operator", "release-lead"]
approval_timeout_s = {timeout_s}
approval_poll_s = 1

[paths]
state = "{tmp / 'state'}"

[store]
kind = "filesystem"
path = "{tmp / 'store'}"

[build]
hosts = ["local", "local"]
timeout_s = 900

[[lanes]]
name = "cpu-smoke"
kind = "cpu-smoke"
host = "local"
""")
    return cfg


class FlowProcess:
    """The flow run in a process of its own, as a worker would run it."""

    def __init__(self, env: dict, config: Path, name: str, log: Path):
        code = ("from flows.release_candidate import release_candidate as f\n"
                f"f.with_options(flow_run_name={name!r})(config={str(config)!r})\n")
        self.log = log
        self.proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env},
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.name = name

    def run_id(self, timeout_s: float = 120) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for run in recent_runs(limit=50):
                if run["name"] == self.name:
                    return run["id"]
            assert self.proc.poll() is None, f"flow process exited early:\n{self.log.read_text()[-4000:]}"
            time.sleep(1)
        raise AssertionError(f"no flow run named {self.name}")

    def wait(self, timeout_s: float = 300) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _approve(env: dict, run_id: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([ASSAY, "approve", run_id, *extra], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def _paused_run(prefect_api, engine_repo, tmp_path, name, timeout_s=1800):
    config = write_config(tmp_path, engine_repo, timeout_s)
    flow = FlowProcess(prefect_api, config, name, tmp_path / "flow.log")
    run_id = flow.run_id()
    state = wait_for_state(run_id, {"PAUSED"}, timeout_s=1500, poll_s=2)
    assert state == "PAUSED", f"run ended {state} before the gate:\n{flow.log.read_text()[-6000:]}"
    return flow, run_id


def _published_versions(tmp_path: Path) -> list[Path]:
    store = tmp_path / "store"
    return sorted(p for p in store.iterdir()) if store.exists() else []


def test_approved_candidate_is_published_and_verifies(prefect_api, engine_repo, tmp_path):
    flow, run_id = _paused_run(prefect_api, engine_repo, tmp_path, f"e2e-approve-{os.getpid()}")
    refused = _approve(prefect_api, run_id, "--as", "intruder", "--reason", "not on the list")
    assert refused.returncode != 0 and "intruder" in (refused.stdout + refused.stderr)
    ok = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "tests: approve")
    assert ok.returncode == 0, ok.stderr
    assert flow.wait() == 0, flow.log.read_text()[-6000:]
    assert wait_for_state(run_id, set(), timeout_s=60) == "COMPLETED"
    (release,) = _published_versions(tmp_path)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["state"] == "published"
    assert manifest["approval"]["approver"] == "local-operator"
    assert {r["kind"] for r in manifest["receipts"]} >= {"candidate", "build", "reproducibility", "lane"}
    assert release.name == manifest["version"]
    verify = subprocess.run([ASSAY, "verify", "--require-ready", "--json", str(release)], capture_output=True,
                            text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["ok"] is True
    # A second run of the same candidate is refused before it builds anything.
    again = FlowProcess(prefect_api, write_config(tmp_path, engine_repo), f"e2e-again-{os.getpid()}", tmp_path / "again.log")
    assert again.wait(600) != 0
    assert "already published" in again.log.read_text()


def test_rejection_fails_the_run_and_publishes_nothing(prefect_api, engine_repo, tmp_path):
    flow, run_id = _paused_run(prefect_api, engine_repo, tmp_path, f"e2e-reject-{os.getpid()}")
    sent = _approve(prefect_api, run_id, "--as", "release-lead", "--reason", "tests: reject", "--reject")
    assert sent.returncode == 0, sent.stderr
    assert flow.wait() != 0
    assert wait_for_state(run_id, set(), timeout_s=60) == "FAILED"
    assert _published_versions(tmp_path) == []
    assert "rejected" in flow.log.read_text()


def test_approval_timeout_fails_the_run_and_publishes_nothing(prefect_api, engine_repo, tmp_path):
    config = write_config(tmp_path, engine_repo, timeout_s=3)
    flow = FlowProcess(prefect_api, config, f"e2e-timeout-{os.getpid()}", tmp_path / "flow.log")
    run_id = flow.run_id()
    assert flow.wait(1500) != 0
    assert "Pausing flow" in flow.log.read_text(), flow.log.read_text()[-6000:]
    assert "no approval" in flow.log.read_text()
    assert wait_for_state(run_id, set(), timeout_s=60) == "FAILED"
    assert _published_versions(tmp_path) == []
    late = _approve(prefect_api, run_id, "--as", "local-operator", "--reason", "too late")
    assert late.returncode != 0 and "not PAUSED" in (late.stdout + late.stderr)
