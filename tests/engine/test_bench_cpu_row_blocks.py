"""scripts/bench_cpu_row_blocks.py: a run times one pass and each block size over the same
prompt, reports them against one pass, and leaves the engine's ROW_BLOCK as it found it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.model import transformer
from tests.script_module import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_cpu_row_blocks.py"


def test_a_run_reports_each_block_size_against_one_pass(tmp_path, llama_dir):
    out = tmp_path / "blocks.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--model", str(llama_dir), "--tokens", "100",
                          "--blocks", "16,40", "--rounds", "2", "--threads", "1", "--json", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    got = json.loads(out.read_text())
    assert got["tokens"] == 100
    rows = {r["row_block"]: r for r in got["rows"]}
    assert sorted(rows) == [16, 40, 100]
    assert rows[100]["speedup"] == 1.0
    for r in rows.values():
        assert len(r["times_s"]) == 2 and all(t > 0 for t in r["times_s"])
        assert abs(r["tok_s"] - 100 / r["median_s"]) < 1e-6
        assert abs(r["speedup"] - rows[100]["median_s"] / r["median_s"]) < 1e-9
        assert isinstance(r["same_bits"], bool)
    assert "(one pass)" in run.stdout and "same bits" in run.stdout


def test_a_missing_model_is_a_usage_error(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), "--model", str(tmp_path / "none")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "no model directory at" in run.stderr and "Traceback" not in run.stderr


def test_the_setting_is_restored(llama_dir, monkeypatch):
    module = load_script(SCRIPT)
    monkeypatch.setattr(sys, "argv", ["bench", "--model", str(llama_dir), "--tokens", "40", "--blocks", "8",
                                      "--rounds", "1", "--threads", "1"])
    before = transformer.ROW_BLOCK
    assert module.main() == 0
    assert transformer.ROW_BLOCK == before
