"""scripts/cpu_prefill_rusage.py: each runner's prefill with its user time, system time and page
faults, beside the machine's cost of a fresh page."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.script_module import load_script, run_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cpu_prefill_rusage.py"


def test_fresh_page_probe_faults_once_a_page():
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.is_file() and "[always]" in thp.read_text():
        pytest.skip("huge pages for every mapping: the probe's 4 KiB pages are not what it gets")
    r = load_script(SCRIPT).fresh_page_cost()
    pages = 256 * 256   # 256 MiB of 4 KiB pages
    assert pages <= r["minor_faults"] < pages * 1.05
    assert r["seconds"] > 0 and r["us_per_fault"] == pytest.approx(r["seconds"] / r["minor_faults"] * 1e6)


def test_both_runners_measured_on_the_tiny_model(llama_dir, tmp_path):
    out = tmp_path / "rusage.json"
    run = run_script(SCRIPT, "--model", str(llama_dir), "--prompt-tokens", "200", "--rounds", "2",
                     "--json", str(out), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["prompt_tokens"] == 200 and len(r["rounds"]) == 2
    assert r["first_token_identical"] is True     # float32 both: the same greedy token
    for row in r["rounds"]:
        for name in ("engine", "transformers"):
            m = row[name]
            assert m["wall_s"] > 0 and m["tok_s"] == pytest.approx(200 / m["wall_s"])
            assert m["user_s"] >= 0 and m["sys_s"] >= 0 and m["minor_faults"] >= 0
    assert "medians over 2 rounds" in run.stdout and "transformers" in run.stdout


def test_a_missing_model_is_named(tmp_path):
    run = run_script(SCRIPT, "--model", str(tmp_path / "nowhere"), timeout=120)
    assert run.returncode == 2
    assert "no model directory at" in run.stderr and "nowhere" in run.stderr and "Traceback" not in run.stderr
