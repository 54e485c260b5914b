"""The cpu-reference lane end to end on this machine: the candidate engine built into a wheel,
installed into a fresh environment, serving the real reference model (make model) over HTTP,
answering a fact and an exact planted code; the window restores the host afterwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gates.lane import run_lane
from hosts.local import LocalHost

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / ".assay" / "models" / "smollm2-135m-instruct"
CANDIDATE = {"id": "c" * 64, "commit": "a" * 40, "tree": "b" * 40}


@pytest.fixture(scope="module")
def engine_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(ROOT / "engine")],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.slow
def test_reference_lane_serves_the_real_model_and_retrieves_exactly(engine_wheel, tmp_path):
    assert (MODEL / "config.json").exists(), "the reference model is missing: run `make model`"
    import engine

    record = run_lane(LocalHost(), "cpu-reference", "cpu-reference", CANDIDATE, engine.__version__, engine_wheel,
                      workdir=str(tmp_path / "lane"), base_python=sys.executable,
                      lease_path=str(tmp_path / "leases" / "gpu"), model=str(MODEL))
    phases = {p["name"]: p for p in record["phases"]}
    assert [p["name"] for p in record["phases"]] == ["install", "identity", "serve", "capital", "retrieval", "stop",
                                                      "restore-audit"]
    assert record["verdict"] == "pass", record["phases"]
    assert phases["identity"]["facts"]["imported_from_lane_venv"] is True
    assert phases["capital"]["facts"]["contains_expected"] is True
    assert phases["retrieval"]["facts"]["exact"] == phases["retrieval"]["facts"]["total"] == 3
    assert all(t["prompt_tokens"] > 900 for t in phases["retrieval"]["facts"]["trials"])
    assert record["window"]["restored"] is True
