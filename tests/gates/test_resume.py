"""Resume after a crash: the qualify process is killed (SIGKILL) in the middle of `context`, with
its engine still running and its lease held; `--resume` keeps the phases that passed (their signed
receipts are not rewritten), runs context and restore, stops the crashed run's engine and
completes with the host restored and audited."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hosts import audit
from hosts.local import LocalHost
from releases.canonical import sha256_hex
from tests.gates.conftest import reference_model

ROOT = Path(__file__).resolve().parents[2]
KEPT = ("preflight", "install", "startup-fit", "protocol")


def _qualify(args, **kw):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.Popen([sys.executable, "-m", "gates.qualify", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _kill_leftovers(workdir: str) -> None:
    """Stop what a failed test left behind (only processes under this test's working directory)."""
    for pid in audit.observe(LocalHost(), marker=workdir, paths={})["processes"]:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_killed_in_context_then_resumed_keeps_passed_phases(tmp_path, engine_wheel, candidate):
    spec = {"name": "cpu-reference", "kind": "cpu-reference", "host": "local", "model": str(reference_model()),
            "lease_path": str(tmp_path / "leases" / "gpu"),
            "qualify": {"phases": [*KEPT, "context"], "context_tokens": 1000, "lease_stale_s": 3}}
    (tmp_path / "lane.json").write_text(json.dumps(spec))
    (tmp_path / "candidate.json").write_text(json.dumps(candidate))
    out = tmp_path / "out"
    workdir = str(out / "work" / "cpu-reference")
    args = ["--lane", "cpu-reference", "--spec", str(tmp_path / "lane.json"), "--candidate",
            str(tmp_path / "candidate.json"), "--wheel", str(engine_wheel), "--out", str(out)]
    try:
        first = _qualify(args)
        for line in first.stderr:
            if "phase context: running" in line:
                break
        time.sleep(3)                              # inside context: its prompts are being prefilled
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        receipts = out / "receipts"
        kept = {p: sha256_hex((receipts / "phase" / "cpu-reference" / f"{p}.dsse.json").read_bytes()) for p in KEPT}
        assert not (receipts / "phase" / "cpu-reference" / "context.dsse.json").exists()
        assert not (receipts / "lane" / "cpu-reference.dsse.json").exists()
        left = audit.observe(LocalHost(), marker=workdir, paths={})
        assert left["processes"] and left["listening"]   # the crashed run's engine is still serving

        second = _qualify([*args, "--resume"])
        stdout, stderr = second.communicate(timeout=1500)
        assert second.returncode == 0, stderr[-3000:]
        for phase in KEPT:
            assert f"phase {phase}: passed earlier, kept" in stderr
            assert sha256_hex((receipts / "phase" / "cpu-reference" / f"{phase}.dsse.json").read_bytes()) == kept[phase]
        assert "phase context: running" in stderr and "phase install: running" not in stderr
        envelope = json.loads((receipts / "lane" / "cpu-reference.dsse.json").read_bytes())
        import base64
        lane = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
        bound = {e["phase"]: e["sha256"] for e in lane["phase_receipts"]}
        assert {p: bound[p] for p in KEPT} == kept and set(bound) == {*KEPT, "context", "restore"}
        assert lane["verdict"] == "pass" and lane["window"]["audit"]["ok"] is True
        restore = next(p for p in lane["phases"] if p["name"] == "restore")["facts"]
        assert restore["restored"] is True
        after = audit.observe(LocalHost(), marker=workdir, paths={"workdir": workdir})
        assert after["processes"] == {} and after["paths"]["workdir"]["exists"] is False
    finally:
        _kill_leftovers(workdir)
