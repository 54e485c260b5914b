"""scripts/ab_cpu_decode_step.py: each side runs its own commit's engine in its own process, the
figures come back per round, and bad input is a usage error, not a traceback."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.script_module import run_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ab_cpu_decode_step.py"


def test_one_commit_against_itself(tmp_path, llama_dir):
    out = tmp_path / "ab.json"
    run = run_script(SCRIPT, "--a", "HEAD", "--b", "HEAD", "--model", str(llama_dir), "--rounds", "2",
                     "--steps", "2", "--context", "40", "--json", str(out))
    assert run.returncode == 0, run.stderr
    got = json.loads(out.read_text())
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert got["revisions"] == {"a": f"HEAD ({head[:12]})", "b": f"HEAD ({head[:12]})"}
    assert [len(got["ms"][s]) for s in ("a", "b")] == [2, 2] and all(m > 0 for s in "ab" for m in got["ms"][s])
    # The same code on the same inputs: every process gave the same first-step logits.
    assert len(set(got["logits_sha256_16"]["a"] + got["logits_sha256_16"]["b"])) == 1 and got["same_logits"]
    assert "round 2/2" in run.stdout and "a / b:" in run.stdout


def test_bad_input_is_a_usage_error(tmp_path, llama_dir):
    for args, says in ((["--a", "no-such-revision", "--b", "HEAD", "--model", str(llama_dir)],
                        "--a 'no-such-revision' names no commit"),
                       (["--a", "HEAD", "--b", "HEAD", "--model", str(tmp_path / "none")], "no model directory at"),
                       (["--a", "HEAD", "--b", "HEAD", "--model", str(llama_dir), "--rounds", "0"],
                        "--rounds and --steps must be at least 1")):
        run = run_script(SCRIPT, *args, timeout=120)
        assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr, run.stderr
