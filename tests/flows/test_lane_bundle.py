"""scripts/lane_bundle.py: the bundle a lane host with no Prefect runs. Made from a real engine
repository by the release recipe, then run with its own run-lane.sh from a copy in another folder,
as a lane host would: the receipts name the bundle's candidate and wheel and are signed with the
key given. The chain is made to fail at preflight (the lane's fault hook), which keeps the run
short and still shows the judged gates' inputs were taken: they are then reported as not run."""
from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from releases import exit_codes, keys
from releases.canonical import file_sha256, load_json_bytes
from releases.receipts import open_receipt
from tests.flows.evidence_fixture import engine_repo, git

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lane_bundle.py"
LANE = "bundle-lane"


def config(tmp: Path, repo: Path) -> Path:
    cfg = tmp / "assay.toml"
    cfg.write_text(f"""
[release]
name = "bundle-test"
source = "{repo}"
subdir = "engine"
approvers = ["local-operator"]
allow_unsigned_approval = true

[store]
kind = "filesystem"
path = "{tmp / 'store'}"

[build]
hosts = ["local", "local"]

[paths]
state = "{tmp / 'state'}"

[incumbent]
ref = "{git(repo, 'rev-parse', 'HEAD')}"

[[lanes]]
name = "{LANE}"
kind = "cpu-smoke"
host = "lane-host"
lease_path = "{tmp / 'leases' / 'gpu'}"
evidence = "evidence/{LANE}"
public_key_file = "{tmp / 'lane.pub.pem'}"
[lanes.qualify]
max_hold_s = 900
[lanes.gates.abba]
min_ratio = 0.9
""")
    return cfg


def bundle(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          timeout=900, cwd=out.parent)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lane-bundle")
    repo = engine_repo(tmp / "repo")
    key = Ed25519PrivateKey.generate()
    (tmp / "lane.pub.pem").write_bytes(keys.public_pem(key.public_key()))
    cfg = config(tmp, repo)
    run = bundle(tmp / "bundle", "--config", str(cfg), "--lane", LANE)
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp, repo, key, cfg, json.loads(run.stdout)


def test_the_bundle_holds_the_candidate_the_lane_and_the_pipeline(made):
    tmp, repo, _, _, summary = made
    out = tmp / "bundle"
    candidate = json.loads((out / "candidate.json").read_text())
    assert candidate["commit"] == git(repo, "rev-parse", "HEAD")
    assert summary["wheel"] == "assay_engine-0.1.0-py3-none-any.whl" and (out / summary["wheel"]).is_file()
    identity = json.loads((out / "incumbent" / "identity.json").read_text())
    assert identity["source_commit"] == candidate["commit"] and identity["origin"] == "ref"
    assert file_sha256(next((out / "incumbent").glob("*.whl"))) == identity["wheel_sha256"]
    # The lane as gates reads it, run on the host itself; the flow-only keys are not there.
    assert json.loads((out / "lane.json").read_text()) == {
        "name": LANE, "kind": "cpu-smoke", "host": "local", "lease_path": str(tmp / "leases" / "gpu"),
        "qualify": {"max_hold_s": 900}}
    assert json.loads((out / "gates.json").read_text()) == {"abba": {"min_ratio": 0.9}}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert summary["pipeline_commit"] == head
    assert sorted(p.name for p in (out / "source").iterdir()) == ["gates", "hosts", "releases"]
    assert (out / "source" / "gates" / "qualify.py").read_bytes() == subprocess.run(
        ["git", "-C", str(ROOT), "show", "HEAD:gates/qualify.py"], capture_output=True, check=True).stdout
    assert os.access(out / "run-lane.sh", os.X_OK)
    assert not [p for p in tmp.iterdir() if ".partial-" in p.name]


def test_run_lane_runs_the_lane_from_a_copy_and_signs_with_the_key_given(made, tmp_path):
    tmp, _, key, _, summary = made
    host = tmp_path / "lane host"                     # a space in the path, as a host's folder may have
    shutil.copytree(tmp / "bundle", host / "bundle")
    key_file = tmp_path / "lane.pem"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    # the interpreter through a wrapper that notes what run-lane.pid holds while the lane runs
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f'#!/bin/sh\ncat "{host}/evidence/run-lane.pid" > "{tmp_path}/pid-seen"\n'
                       f'exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": str(wrapper), "ASSAY_LANE_FAULT": "preflight"}
    proc = subprocess.Popen(["sh", str(host / "bundle" / "run-lane.sh"), str(key_file), str(host / "evidence")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:   # timed out: stop the script and the lane under it before failing
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    run = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert (tmp_path / "pid-seen").read_text() == f"{proc.pid}\n"
    assert run.returncode == exit_codes.FAILED, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    # what a detached run leaves to wait on: the exit code, and no pid file once it has ended
    assert (host / "evidence" / "run-lane.exit").read_text() == f"{exit_codes.FAILED}\n"
    assert not (host / "evidence" / "run-lane.pid").exists()
    assert f"{LANE}: phase preflight: fail" in run.stderr
    assert "judged gates: not run, the native chain ended fail" in run.stderr
    root = host / "evidence" / "receipts"
    wheel = file_sha256(host / "bundle" / summary["wheel"])
    candidate = json.loads((host / "bundle" / "candidate.json").read_text())
    opened = {}
    for path in sorted(root.rglob("*.dsse.json")):
        stmt, predicate = open_receipt(load_json_bytes(path.read_bytes()), key.public_key(), where=str(path))
        opened[path.relative_to(root).as_posix()] = predicate
        assert predicate["candidate"]["commit"] == candidate["commit"]
    assert sorted(opened) == [f"lane/{LANE}.dsse.json", f"phase/{LANE}/preflight.dsse.json",
                              f"phase/{LANE}/restore.dsse.json"]
    assert opened[f"lane/{LANE}.dsse.json"]["artifact"]["sha256"] == wheel


def test_bad_requests_are_refused_with_a_reason_and_write_nothing(made, tmp_path):
    tmp, _, _, cfg, _ = made
    cases = [
        (["--config", str(cfg), "--lane", "nope"], exit_codes.BAD_INPUT, f"no lane named 'nope'; known: ['{LANE}']"),
        (["--config", str(cfg), "--lane", LANE, "--model", "models/x"], exit_codes.BAD_INPUT,
         "model 'models/x' is relative"),
        (["--config", str(cfg), "--ref", "no-such-ref"], exit_codes.BAD_INPUT, "ref 'no-such-ref' names no commit"),
        (["--model", "/m"], exit_codes.USAGE, "--model needs --lane"),
    ]
    for args, code, message in cases:
        run = bundle(tmp_path / "out", *args)
        assert (run.returncode, message in run.stderr, "Traceback" in run.stderr) == (code, True, False), run.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == [], args
    run = bundle(tmp / "bundle", "--config", str(cfg))
    assert run.returncode == exit_codes.USAGE and "exists; give a new directory" in run.stderr
