"""scripts/probe_rope_table.py: every process of every commit is counted, each table is checked
against float64, and bad input is a usage error, not a traceback."""
from __future__ import annotations

import json
from pathlib import Path

from tests.script_module import run_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "probe_rope_table.py"


def test_each_process_is_counted(tmp_path, llama_dir):
    out = tmp_path / "probe.json"
    run = run_script(SCRIPT, "--revs", "HEAD", "--model", str(llama_dir), "--processes", "2",
                     "--positions", "300", "--json", str(out))
    assert run.returncode == 0, run.stderr
    got = json.loads(out.read_text())
    assert list(got["runs"]) == ["HEAD"] and len(got["runs"]["HEAD"]) == 2 and got["positions"] == 300
    for r in got["runs"]["HEAD"]:
        assert set(r["err"]) == {"cos", "sin"} and all(0 <= e < 1e-3 for e in r["err"].values())
        assert len(r["sha"]) == 16
    assert "HEAD (" in run.stdout and "2 processes; wrong cos table" in run.stdout


def test_bad_input_is_a_usage_error(tmp_path, llama_dir):
    for args, says in ((["--revs", "no-such-revision", "--model", str(llama_dir)], "'no-such-revision' names no commit"),
                       (["--revs", "HEAD", "--model", str(tmp_path / "none")], "no model directory at"),
                       (["--revs", "HEAD", "--model", str(llama_dir), "--processes", "0"], "must be at least 1")):
        run = run_script(SCRIPT, *args, timeout=120)
        assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_without_revisions_it_probes_this_checkout(tmp_path, llama_dir):
    out = tmp_path / "probe.json"
    run = run_script(SCRIPT, "--model", str(llama_dir), "--processes", "1", "--json", str(out))
    assert run.returncode == 0, run.stderr
    got = json.loads(out.read_text())
    assert got["revisions"] == {"this checkout": "working tree"}
    (only,) = got["runs"]["this checkout"]
    assert only["engine"].startswith(str(REPO / "engine")) and max(only["err"].values()) < 1e-3
    assert "this checkout (working tree): 1 process;" in run.stdout
