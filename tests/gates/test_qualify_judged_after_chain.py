"""`python -m gates.qualify` with the judged gates asked for: they run only after a native chain
that passed. A chain that did not pass (here a fault injected into preflight) decides the lane:
the judged gates, which would start the engine on the same host, are not run, and the command
ends FAILED with a line saying why, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from releases import exit_codes
from releases.canonical import file_sha256

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_judged_gates_wait_for_a_passing_chain(tmp_path, engine_wheel, candidate):
    cand = tmp_path / "candidate.json"
    cand.write_text(json.dumps(candidate))
    identity = tmp_path / "identity.json"
    identity.write_text(json.dumps({"version": candidate["package"]["version"], "wheel_sha256": file_sha256(engine_wheel),
                                    "source_commit": "c" * 40, "origin": "ref"}))
    spec = tmp_path / "lane.json"
    spec.write_text(json.dumps({"name": "cpu-smoke", "kind": "cpu-smoke", "host": "local",
                                "lease_path": str(tmp_path / "leases" / "gpu")}))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "ASSAY_LANE_FAULT": "preflight",
           "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "gates.qualify", "--lane", "cpu-smoke", "--spec", str(spec),
                          "--candidate", str(cand), "--wheel", str(engine_wheel), "--out", str(tmp_path / "out"),
                          "--incumbent-wheel", str(engine_wheel), "--incumbent-identity", str(identity)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert run.returncode == exit_codes.FAILED, run.stderr
    assert "Traceback" not in run.stderr
    assert "judged gates: not run, the native chain ended fail" in run.stderr
    assert "cpu-smoke: phase preflight: fail" in run.stderr
    receipts = sorted(p.name for p in (tmp_path / "out" / "receipts").rglob("*.dsse.json"))
    # The chain's receipts (preflight failed, restore) and the lane's; no judged gate's receipt.
    assert receipts == ["cpu-smoke.dsse.json", "preflight.dsse.json", "restore.dsse.json"]
