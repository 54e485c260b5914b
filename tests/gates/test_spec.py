"""Lane specs from assay.toml (validated with gates' own schema) or a JSON file, and the
command line's answers to bad input: typed, naming the file and key, exit 3; usage exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gates.spec import LaneSpecError, load_lane, load_lane_json

ROOT = Path(__file__).resolve().parents[2]

TOML = """
[paths]
state = "state"

[[lanes]]
name = "cpu-smoke"
kind = "cpu-smoke"
host = "local"

[[lanes]]
name = "ref"
kind = "cpu-reference"
host = "local"
model = "models/ref"
[lanes.qualify]
context_tokens = 2000
max_hold_s = 300
phases = ["preflight", "context"]
"""


def test_lane_from_toml_resolves_paths_and_settings(tmp_path):
    (tmp_path / "assay.toml").write_text(TOML)
    spec = load_lane("ref", tmp_path / "assay.toml")
    assert spec.kind == "cpu-reference" and spec.model == str((tmp_path / "models" / "ref").resolve())
    assert spec.setting("context_tokens") == 2000 and spec.setting("max_hold_s") == 300
    assert spec.setting("max_context") == 8192          # the kind's default
    assert spec.chain == ("preflight", "context", "restore")
    assert spec.state_root == str((tmp_path / "state").resolve())
    smoke = load_lane("cpu-smoke", tmp_path / "assay.toml")
    assert smoke.chain == ("preflight", "install", "startup-fit", "protocol", "restart", "benchmark", "restore")


def test_bad_lane_tables_name_the_file_and_key(tmp_path):
    bad = tmp_path / "assay.toml"
    bad.write_text(TOML.replace("context_tokens = 2000", "context_tokens = 2000\ncolour = 1"))
    with pytest.raises(LaneSpecError) as info:
        load_lane("ref", bad)
    assert info.value.file == str(bad) and info.value.key_path == "/lanes/1/qualify"
    assert "colour" in info.value.message
    with pytest.raises(LaneSpecError) as info:
        load_lane("nope", tmp_path / "assay.toml")
    assert "no lane named 'nope'" in str(info.value)
    bad.write_text("[[lanes]\n")
    with pytest.raises(LaneSpecError, match="not valid TOML"):
        load_lane("ref", bad)
    spec = tmp_path / "lane.json"
    spec.write_text(json.dumps({"name": "ref", "kind": "cpu-reference", "host": "local"}))
    with pytest.raises(LaneSpecError) as info:
        load_lane_json(spec)
    assert info.value.key_path == "/model"


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gates.qualify", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})


def test_cli_exit_codes_for_usage_and_bad_input(tmp_path, engine_wheel, candidate):
    assert _cli("--lane", "x", cwd=tmp_path).returncode == 2            # usage: required options missing
    cand = tmp_path / "candidate.json"
    cand.write_text(json.dumps(candidate))
    common = ["--lane", "cpu-smoke", "--wheel", str(engine_wheel), "--out", str(tmp_path / "out")]
    broken = tmp_path / "broken.json"
    broken.write_text('{"candidate_schema": "assay/candidate/v1"')
    r = _cli(*common, "--candidate", str(broken), cwd=tmp_path)
    assert r.returncode == 3 and "broken.json" in r.stderr and "Traceback" not in r.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**candidate, "commit": "xyz"}))
    r = _cli(*common, "--candidate", str(wrong), cwd=tmp_path)
    assert r.returncode == 3 and "/commit" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "assay.toml").write_text(TOML.replace('kind = "cpu-smoke"', 'kind = "tpu"'))
    r = _cli(*common, "--candidate", str(cand), "--config", str(tmp_path / "assay.toml"), cwd=tmp_path)
    assert r.returncode == 3 and "/lanes/0/kind" in r.stderr
    r = _cli("--lane", "cpu-smoke", "--wheel", str(tmp_path / "missing.whl"), "--out", str(tmp_path / "o"),
             "--candidate", str(cand), cwd=tmp_path)
    assert r.returncode == 3 and "missing.whl" in r.stderr
    assert not (tmp_path / "out" / "receipts").exists()     # nothing half-written
