"""scripts/kernel_sass.py: the decode-attention kernel compiled offline for sm_90, read back as
registers, occupancy and its main loop's instructions (no GPU needed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.script_module import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "kernel_sass.py"


def _module():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def sass():
    return _module()


def _report(tmp_path: Path, *args: str) -> dict:
    """The script in a fresh process: this one runs Triton interpreted (tests/conftest.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_INTERPRET="1")   # the script drops it
    out = tmp_path / "report.json"
    run = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(out)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "programs an SM" in run.stdout
    return json.loads(out.read_text())


def test_int8_kernel_report(tmp_path):
    r = _report(tmp_path, "--kv", "int8")
    assert r["arch"] == "sm_90" and r["num_warps"] == 2
    mix = r["loop_mix"]
    # int8 scores on the integer tensor cores, P @ V on the bf16 ones, exp2 on the SFU.
    assert mix["IMMA"] > 0 and mix["HMMA"] > 0 and mix["MUFU"] > 0
    assert sum(mix.values()) == r["loop_instructions"] > 100
    assert 24 <= r["registers"] <= 255 and r["shared_bytes"] > 0
    # The pin's K and V tiles go through shared memory, one 64-token tile of each at a time.
    assert r["pipeline_buffers"]["k"] == "1x64x128xi8" and r["pipeline_buffers"]["v"].startswith("1x")
    occ = r["programs_per_sm"]
    assert occ["resident"] == min(occ["registers"], occ["shared"], occ["threads"], occ["programs"]) >= 1


def test_page_sets_the_cache_block_size(tmp_path):
    # V is read a page at a time: one 64-token page a tile at --page 64, four 16-token ones by default.
    r = _report(tmp_path, "--kv", "int8", "--page", "64")
    assert r["pipeline_buffers"]["v"] == "1x1x128x64xi8"


def test_float32_kernel_has_no_tensor_core_products(tmp_path):
    r = _report(tmp_path, "--kv", "fp32", "--shape", "smollm2-135m")
    assert "HMMA" not in r["loop_mix"] and "IMMA" not in r["loop_mix"]
    assert r["loop_mix"]["FFMA"] > 0


def test_occupancy_by_each_limit(sass):
    # 166 registers a thread, 2 warps: 168 x 32 per warp rounded to 256 -> 5,376; 65,536 // 10,752 = 6.
    occ = sass.programs_per_sm(90, 166, 64, 23040)
    assert (occ["registers"], occ["shared"], occ["threads"], occ["resident"]) == (6, 9, 32, 6)
    assert sass.programs_per_sm(86, 128, 128, 1000)["threads"] == 12


def test_main_loop_is_the_longest_backward_branch(sass):
    text = "\n".join([
        "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
        ".L_x_0:",
        "        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;",
        "        /*0020*/               @P0 BRA `(.L_x_0) ;",
        ".L_x_1:",
        "        /*0030*/                   FFMA R3, R3, R3, R3 ;",
        "        /*0040*/                   LDL R4, [R1] ;",
        "        /*0050*/              @!P1 BRA `(.L_x_1) ;",
        "        /*0060*/                   EXIT ;"])
    assert [op.split()[0] for op in sass.main_loop(text)] == ["FFMA", "LDL", "BRA"]


def test_a_span_holding_an_exit_is_not_the_loop(sass):
    # TMA waits retry out of line, past the epilogue, and branch back into the loop's body.
    text = "\n".join([
        ".L_x_0:",
        "        /*0000*/                   FFMA R3, R3, R3, R3 ;",
        ".L_x_1:",
        "        /*0010*/                   UTMALDG.2D [UR8], [UR12] ;",
        "        /*0020*/              @!P1 BRA `(.L_x_0) ;",
        "        /*0030*/                   EXIT ;",
        ".L_x_2:",
        "        /*0040*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR5], R96 ;",
        "        /*0050*/                   BRA `(.L_x_1) ;"])
    assert [op.split()[0] for op in sass.main_loop(text)] == ["FFMA", "UTMALDG.2D", "BRA"]


def test_bad_config_is_refused_with_its_text():
    run = subprocess.run([sys.executable, str(SCRIPT), "--kv", "int8", "--config", "64,2,x"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "--config '64,2,x'" in run.stderr and "Traceback" not in run.stderr


def test_pipeline_buffers_read_from_ttgir(sass):
    ttgir = "\n".join([
        "    %q_hi_64 = ttg.local_alloc %q_hi : (tensor<16x128xi8, #blocked3>) -> !ttg.memdesc<16x128xi8, #shared, #smem> loc(#l)",
        "    %k_96 = ttg.local_alloc : () -> !ttg.memdesc<2x64x128xi8, #shared, #smem, mutable> loc(#l)",
        "    %k_s_99 = ttg.local_alloc : () -> !ttg.memdesc<2x64xf32, #shared1, #smem, mutable> loc(#l)"])
    # The q halves are stored once (not a pipeline buffer); K and its scales are, two tiles deep.
    assert sass.pipeline_buffers(ttgir) == {"k": "2x64x128xi8", "k_s": "2x64xf32"}
