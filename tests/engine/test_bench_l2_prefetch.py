"""scripts/bench_l2_prefetch.py without a GPU: its kernels compiled for sm_90 offline (what the
H200 ran), its refusal on a machine without one, and its argument checks."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.script_module import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_l2_prefetch.py"
l2_prefetch = load_script(SCRIPT)


# Compiled in a fresh process: this one runs Triton interpreted (tests/conftest.py).
_COMPILE = """
import sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from pathlib import Path
from tests.script_module import load_script
l2_prefetch = load_script(Path("scripts/bench_l2_prefetch.py"))
src = ASTSource(fn=l2_prefetch._l2_prefetch_kernel,
                signature={"src": "*bf16", "sink": "*i32", "nbytes": "i64", "CHUNK": "constexpr", "BLOCK": "constexpr"},
                constexprs={"CHUNK": int(sys.argv[1]), "BLOCK": l2_prefetch.CHUNKS_PER_PROGRAM})
kernel = compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1})
assert kernel.asm["cubin"], "ptxas gave no cubin"
ptx = kernel.asm["ptx"]
print(ptx[ptx.index(".entry"):])
"""


# The RoPE/KV-write kernel with prefetching programs after the token programs (--part decode's
# fused settings), as the benchmark launched it for the 8B model's bf16 cache.
_COMPILE_FUSED = """
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from pathlib import Path
from tests.script_module import load_script
m = load_script(Path("scripts/bench_l2_prefetch.py"))
k = m._rope_write_prefetch_kernel
consts = dict(IS_INT8=False, PAGE=16, BLOCK_HQ=32, BLOCK_HK=8, BLOCK_D=128, HALF=64, CHUNK=65536, LANES=m.FUSED_LANES)
sig = {n: ("*bf16" if n.endswith("_ptr") or n in ("pf_a", "pf_b") else "i32") for n in k.arg_names}
sig.update(slot_ptr="*i64", sink="*i32", **{c: "constexpr" for c in consts})
kernel = compile(ASTSource(fn=k, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                 options={"num_warps": 4})
assert kernel.asm["cubin"], "ptxas gave no cubin"
ptx = kernel.asm["ptx"]
print(ptx[ptx.index(".entry"):])
"""


def _ptx_body(tmp_path: Path, chunk: int, program: str = _COMPILE) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run([sys.executable, "-c", program, str(chunk)], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_kernel_issues_one_bulk_prefetch_a_lane_of_at_most_chunk_bytes(tmp_path):
    body = _ptx_body(tmp_path, 65536)
    assert len(re.findall(r"cp\.async\.bulk\.prefetch\.L2\.global", body)) == 1
    assert ".reqntid 32" in body                       # one warp a program
    assert re.search(r"min\.s64\s+%rd\d+, %rd\d+, 65536;", body)   # the last lane's size clamped to the chunk
    assert re.search(r"and\.b32\s+%r\d+, %r\d+, 131056;", body)    # ... and rounded down to 16 bytes


def test_fused_kernel_keeps_the_rope_write_and_adds_two_prefetch_ranges(tmp_path):
    body = _ptx_body(tmp_path, 0, _COMPILE_FUSED)
    assert len(re.findall(r"cp\.async\.bulk\.prefetch\.L2\.global", body)) == 2   # o's weight, then gate_up's head
    assert ".reqntid 128" in body                      # four warps: one lane a chunk, FUSED_LANES of them
    assert len(re.findall(r"st\.global", body)) >= 3   # the token programs still store q, k and v


def test_every_decode_setting_names_only_known_switches():
    known = {"sep_o", "fused_o", "side_o", "b_mb", "heads_mb", "chunk_kb", "blas"}
    assert l2_prefetch.DECODE_SETTINGS["none"] == {}
    for name, setting in l2_prefetch.DECODE_SETTINGS.items():
        assert set(setting) <= known, name
        assert not ("b_mb" in setting and not (setting.get("fused_o") or setting.get("side_o"))), name


@pytest.mark.parametrize("flag,text", [("--settings", "none,bogus"), ("--settings", ""),
                                       ("--shapes", "1x"), ("--shapes", "0x1024"), ("--shapes", "8")])
def test_decode_arguments_are_checked(flag, text, capsys):
    with pytest.raises(SystemExit) as e:
        l2_prefetch.main(["--part", "decode", flag, text])
    assert e.value.code == 2
    assert flag in capsys.readouterr().err
    assert l2_prefetch.shape_list("1x1024,8x32768") == [(1, 1024), (8, 32768)]
    assert l2_prefetch.setting_list("none,side-o-64k") == ["none", "side-o-64k"]


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9,
                    reason="an sm_90 GPU runs the benchmark instead of refusing")
def test_refuses_without_an_sm90_gpu():
    with pytest.raises(SystemExit, match="needs an sm_90 GPU"):
        l2_prefetch.main([])


@pytest.mark.parametrize("text", ["0", "16,-4", "16,x", ""])
def test_chunks_must_be_positive_whole_kb(text, capsys):
    with pytest.raises(SystemExit) as e:
        l2_prefetch.main(["--chunks-kb", text])
    assert e.value.code == 2
    assert "--chunks-kb" in capsys.readouterr().err
    assert l2_prefetch.chunk_sizes("16,64") == [16384, 65536]
