"""scripts/profile_cpu_prefill.py: one CPU prefill under torch.profiler, its operators' shares,
the attention's and the products' achieved rates, and the ceilings they imply."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.model.config import ModelConfig
from tests.script_module import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "profile_cpu_prefill.py"


def _module():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model") / "tiny"
    run = subprocess.run([sys.executable, "-m", "engine", "make-tiny-model", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return out


def test_flops_of_a_known_shape():
    cfg = ModelConfig(arch="llama", vocab_size=100, hidden_size=8, num_layers=2, num_heads=2,
                      num_kv_heads=1, head_dim=4, intermediate_size=16)
    attn, products = _module().flops(cfg, 3)
    # 2 layers x 2 products x 2 flops x 2 heads x 4 dims x (3 + 2 + 1) causal pairs
    assert attn == 2 * 2 * 2 * 2 * 4 * 6
    # per row: qkv 8 x (8 + 4 + 4), o 8 x 8, gate/up/down 3 x 8 x 16; over 3 rows, 2 layers;
    # plus the lm_head on one row
    assert products == 2 * 2 * 3 * (8 * 16 + 8 * 8 + 3 * 8 * 16) + 2 * 8 * 100


def test_profile_of_the_tiny_model(tiny, tmp_path):
    out = tmp_path / "profile.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--model", str(tiny), "--tokens", "300",
                          "--top", "200", "--json", str(out)], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["tokens"] == 300 and r["wall_s"] > 0
    assert "prefill of 300 tokens" in run.stdout and "ceiling with the attention" in run.stdout
    ops = {o["op"]: o for o in r["ops"]}
    attn = ops["aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert attn["calls"] == 2          # one fused causal call a layer: the tiny model has two
    assert attn["gflops"] > 0 and ops["aten::mm"]["gflops"] > 0
    assert len(r["ops"]) < 200         # so the table holds every operator, and their shares sum to 1
    assert sum(o["share"] for o in r["ops"]) == pytest.approx(1.0, abs=2e-3)
    assert r["attention"]["seconds"] + r["products"]["seconds"] + r["other_seconds"] == \
        pytest.approx(r["profiled_s"], abs=2e-3)
    # making every other operator free can only raise the ceiling
    assert r["ceiling_and_other_ops_free"] >= r["ceiling_attention_at_product_rate"]


def test_a_missing_model_is_named(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), "--model", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 2
    assert "nowhere" in run.stderr and "Traceback" not in run.stderr


def test_by_shape_names_the_attention_inputs(tiny, tmp_path):
    out = tmp_path / "profile.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--model", str(tiny), "--tokens", "96",
                          "--by-shape", "--json", str(out)], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads(out.read_text())
    attn = [o for o in r["ops"] if o["op"] == "aten::_scaled_dot_product_flash_attention_for_cpu"]
    # the tiny model: 4 query heads, 2 kv heads of 32 dims; q, k, v as [1, heads, tokens, dims]
    assert attn and [s for s in attn[0]["shapes"] if s][:3] == [[1, 4, 96, 32], [1, 2, 96, 32],
                                                               [1, 2, 96, 32]]
    assert "1x4x96x32" in run.stdout
