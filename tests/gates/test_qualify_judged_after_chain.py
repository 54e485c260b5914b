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


def _qualify(tmp_path: Path, engine_wheel: Path, candidate: dict, incumbent: Path, version: str,
             fault: str | None = None) -> subprocess.CompletedProcess:
    """`python -m gates.qualify` on the cpu-smoke lane (local host, its lease under tmp_path/leases)
    with the judged gates asked for against `incumbent`."""
    cand = tmp_path / "candidate.json"
    cand.write_text(json.dumps(candidate))
    identity = tmp_path / "identity.json"
    identity.write_text(json.dumps({"version": version, "wheel_sha256": file_sha256(incumbent),
                                    "source_commit": "c" * 40, "origin": "ref"}))
    spec = tmp_path / "lane.json"
    spec.write_text(json.dumps({"name": "cpu-smoke", "kind": "cpu-smoke", "host": "local",
                                "lease_path": str(tmp_path / "leases" / "gpu")}))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    if fault:
        env["ASSAY_LANE_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "gates.qualify", "--lane", "cpu-smoke", "--spec", str(spec),
                           "--candidate", str(cand), "--wheel", str(engine_wheel), "--out", str(tmp_path / "out"),
                           "--incumbent-wheel", str(incumbent), "--incumbent-identity", str(identity)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)


@pytest.mark.slow
def test_judged_gates_wait_for_a_passing_chain(tmp_path, engine_wheel, candidate):
    run = _qualify(tmp_path, engine_wheel, candidate, engine_wheel, candidate["package"]["version"], fault="preflight")
    assert run.returncode == exit_codes.FAILED, run.stderr
    assert "Traceback" not in run.stderr
    assert "judged gates: not run, the native chain ended fail" in run.stderr
    assert "cpu-smoke: phase preflight: fail" in run.stderr
    receipts = sorted(p.name for p in (tmp_path / "out" / "receipts").rglob("*.dsse.json"))
    # The chain's receipts (preflight failed, restore) and the lane's; no judged gate's receipt.
    assert receipts == ["cpu-smoke.dsse.json", "preflight.dsse.json", "restore.dsse.json"]


@pytest.mark.slow
def test_a_judged_window_that_cannot_serve_fails_in_one_line(tmp_path, engine_wheel, candidate):
    """A passing chain, then an incumbent that cannot be installed: the judged window raises
    PhaseFailed. The command ends FAILED with one line naming the judged gates and the cause,
    writes no judged receipt, and gives the lease back."""
    # A wheel by name and digest, not by content: pip cannot install it.
    incumbent = tmp_path / "incumbent" / "assay_engine-0.0.1-py3-none-any.whl"
    incumbent.parent.mkdir()
    incumbent.write_bytes(b"not a zip archive\n")
    run = _qualify(tmp_path, engine_wheel, candidate, incumbent, "0.0.1")
    assert run.returncode == exit_codes.FAILED, run.stderr
    assert "Traceback" not in run.stderr
    assert "cpu-smoke: lane cpu-smoke: pass" in run.stderr          # the chain passed first
    errors = [line for line in run.stderr.splitlines() if line.startswith("qualify: error:")]
    assert errors == ["qualify: error: judged gates: pip could not install the wheel"], run.stderr[-3000:]
    root = tmp_path / "out" / "receipts"
    receipts = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.dsse.json"))
    assert len(receipts) > 3 and any(r.endswith("restore.dsse.json") for r in receipts), receipts
    assert not [r for r in receipts if r.startswith("verdict-")], receipts      # no judged gate's receipt
    assert run.stderr.count("lease held on local") == 2              # the chain's window, then the judged one
    assert not [p for p in (tmp_path / "leases").rglob("*") if p.is_file()], "the judged window kept its lease"
