"""scripts/bench_l2_prefetch.py without a GPU: its kernel compiled for sm_90 offline (what the
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


def _ptx_body(tmp_path: Path, chunk: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run([sys.executable, "-c", _COMPILE, str(chunk)], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_kernel_issues_one_bulk_prefetch_a_lane_of_at_most_chunk_bytes(tmp_path):
    body = _ptx_body(tmp_path, 65536)
    assert len(re.findall(r"cp\.async\.bulk\.prefetch\.L2\.global", body)) == 1
    assert ".reqntid 32" in body                       # one warp a program
    assert re.search(r"min\.s64\s+%rd\d+, %rd\d+, 65536;", body)   # the last lane's size clamped to the chunk
    assert re.search(r"and\.b32\s+%r\d+, %r\d+, 131056;", body)    # ... and rounded down to 16 bytes


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
