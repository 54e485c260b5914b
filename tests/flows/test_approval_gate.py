"""The approval gate on a real Prefect server: an unsigned approval is refused where the configuration
requires signatures (the run pauses again), and `assay approve --key` resumes it with a signed one."""
from __future__ import annotations

import contextvars
import threading
import time
from pathlib import Path

import pytest
from prefect import flow
from typer.testing import CliRunner

from flows import cli
from flows.approval import wait_for_approval
from flows.config import load_config
from flows.runs import recent_runs
from releases.approval import build_approval
from releases.keys import key_id, new_person_key, public_pem
from releases.manifest import load_manifest
from tests.releases.fixtures import build_release

runner = CliRunner()


@flow(name="approval-gate-test")
def gate(config: str, manifest_path: str) -> dict:
    cfg = load_config(config)
    manifest = load_manifest(Path(manifest_path).read_bytes())

    def check(decision) -> None:  # what the release flow's record step does: refuse an unfit decision
        build_approval(manifest, decision=decision.decision, approver=decision.approver,
                       allowed_approvers=cfg.approvers, reason=decision.reason,
                       acknowledged_waivers=decision.acknowledged_waivers, flow_run_id="gate",
                       signature=decision.signature, approver_keys=cfg.approver_keys,
                       allow_unsigned=cfg.allow_unsigned_approval)

    return wait_for_approval("a ready release", 240, 1, cfg.approvers, check=check).model_dump()


def _paused_runs() -> list[str]:
    return [r["id"] for r in recent_runs(limit=50, state="PAUSED") if r["flow"] == "approval-gate-test"]


def _wait_paused(timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = _paused_runs()
        if runs:
            return runs[0]
        time.sleep(1)
    raise TimeoutError("the gate flow never paused")


def _pauses(run_id: str, at_least: int, timeout_s: float = 60) -> int:
    """How many times the run has entered PAUSED (polled until `at_least` or the timeout)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    while True:
        with get_client(sync_client=True) as client:
            states = client.read_flow_run_states(UUID(run_id))
        count = sum(1 for s in states if s.type.value == "PAUSED")
        if count >= at_least or time.monotonic() > deadline:
            return count
        time.sleep(1)


@pytest.mark.slow
def test_unsigned_refused_then_signed_approval_resumes(prefect_api, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    for name, value in prefect_api.items():
        monkeypatch.setenv(name, value)
    rel = build_release(tmp_path / "1.2.3", state="ready")
    key_path, public = new_person_key("release-manager")
    config = tmp_path / "assay.toml"
    config.write_text('[release]\nname = "x"\nsource = "."\nsubdir = "engine"\nallow_unsigned_approval = false\n'
                      f'[release.approvers.release-manager]\npublic_key = """{public_pem(public).decode()}"""\n'
                      '[store]\nkind = "filesystem"\npath = "store"\n[build]\nhosts = ["local", "local"]\n'
                      '[[lanes]]\nname = "cpu-smoke"\nkind = "cpu-smoke"\nhost = "local"\n')
    result: dict = {}
    ctx = contextvars.copy_context()  # the Prefect settings of the fixture, in the flow's thread
    manifest = str(rel.root / "manifest.json")
    thread = threading.Thread(target=lambda: result.update(ctx.run(gate, str(config), manifest)), daemon=True)
    thread.start()
    run_id = _wait_paused()
    common = ["approve", run_id, "--as", "release-manager", "--reason", "green", "--waiver", "lane-latency-p99"]

    unsigned = runner.invoke(cli.app, common + ["--key", str(tmp_path / "none")])
    assert unsigned.exit_code == 3  # a named key that does not exist is bad input, nothing is sent
    key_path.rename(tmp_path / "away.pem")  # no default key: the CLI sends an unsigned approval
    sent = runner.invoke(cli.app, common)
    assert sent.exit_code == 0, sent.output
    assert "UNSIGNED" in sent.stderr
    assert _pauses(run_id, at_least=2) >= 2  # refused by the flow's check: paused again, waiting
    assert not result

    signed = runner.invoke(cli.app,
                           common + ["--key", str(tmp_path / "away.pem"), "--manifest", manifest])
    assert signed.exit_code == 0, signed.output
    thread.join(120)
    assert result["approver"] == "release-manager" and result["decision"] == "approve"
    assert result["signature"]["signatures"][0]["keyid"] == key_id(public)
