"""scripts/bench_persistent_layers.py without a GPU: its persistent kernel
(scripts/persistent_layers_kernel.py) compiled for sm_90 offline (what the H200 ran), the grid
barrier's shape in the PTX, its refusal on a machine without a GPU, and its argument checks."""
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
SCRIPT = REPO / "scripts" / "bench_persistent_layers.py"
persistent = load_script(SCRIPT)

# Compiled in a fresh process: this one runs Triton interpreted (tests/conftest.py).
_COMPILE = """
import sys
from pathlib import Path
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from tests.script_module import load_script
m = load_script(Path("scripts/persistent_layers_kernel.py"))
variant, stages = sys.argv[1], int(sys.argv[2])
desc = "tensordesc<bf16[1,32,128]>"
sig = dict(r_ptr="*fp32", n1_ptr="*bf16", n2_ptr="*bf16", wqkv_ptr="*bf16", wo_ptr="*bf16", wgu_ptr="*bf16",
           wd_ptr="*bf16", p_ptr="*fp32", p2_ptr="*fp32", qkv_ptr="*bf16", gu_ptr="*bf16", sync_ptr="*i32", times_ptr="*i64",
           dqkv=desc, do=desc, dgu=desc, dd=desc, kc_ptr="*bf16", vc_ptr="*bf16", cos_ptr="*bf16", sin_ptr="*bf16",
           att_o="*fp32", att_ml="*fp32", sm_scale="fp32", table_ptr="*i32", lens_ptr="*i32", slot_ptr="*i64",
           eps="fp32")
consts = dict(LAYERS=32, H=m.HIDDEN, Q=m.QKV, I=m.INTER, S_QKV=16, S_O=8, S_GU=2, S_D=16, BK=32, BN=128, BR=128,
              BARRIERS_ONLY=variant == "barriers",
              KIND={"barriers": 0, "loads": 0, "tma": 1, "tma-dot": 3, "fold": 3, "attn": 3, "paged": 3,
                    "split128": 3}[variant],
              FOLD=variant in ("fold", "attn", "paged", "split128"), ATTN=variant in ("attn", "paged", "split128"),
              T=1025, TP=1040, NS=9 if variant == "split128" else 5, NS2=16 if variant == "split128" else 8,
              MERGE_IN_O=False, SLOTS=9 if variant in ("attn", "paged", "split128") else 8,
              PAGED=variant in ("paged", "split128"), SPLIT=128 if variant == "split128" else 256)
sig.update({c: "constexpr" for c in consts})
kernel = compile(ASTSource(fn=m._layers_kernel, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                 options={"num_warps": 4, "num_stages": stages})
assert kernel.asm["cubin"], "ptxas gave no cubin"
ptx = kernel.asm["ptx"]
print(kernel.metadata.shared)
print(ptx[ptx.index(".entry"):])
"""


def _compiled(tmp_path: Path, variant: str, stages: int = 1) -> tuple[int, str]:
    """(shared memory bytes, PTX) of _layers_kernel: variant "barriers" (the barriers alone),
    "loads" (kind 0), "tma" (kind 1) or "tma-dot" (kind 3)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    run = subprocess.run([sys.executable, "-c", _COMPILE, variant, str(stages)], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    shared, ptx = run.stdout.split("\n", 1)
    return int(shared), ptx


def _ptx_body(tmp_path: Path, variant: str) -> str:
    return _compiled(tmp_path, variant)[1]


def test_grid_barrier_arrives_once_a_program_and_polls_with_acquire_loads(tmp_path):
    body = _ptx_body(tmp_path, "barriers")
    # One thread a program arrives (a release add) and polls (acquire loads); bar.sync shares what it saw.
    assert re.findall(r"@%p\d+ atom\.global\.gpu\.release\.add\.u32", body)
    assert len(re.findall(r"@%p\d+ ld\.global\.gpu\.acquire\.b32", body)) == 2
    assert re.search(r"setp\.lt\.u32\s+%p\d+, %r\d+, 65535;", body)     # the bounded spin: no hang
    assert re.search(r"atom\.global\.gpu\.acq_rel\.max\.s32", body)       # ... that marks the run failed


def test_layers_kernel_compiles_and_reads_shared_data_past_l1(tmp_path):
    body = _ptx_body(tmp_path, "loads")
    assert re.search(r"ld\.global\.cg", body)          # what other programs wrote is not read from a stale L1
    assert not re.search(r"cp\.async\.bulk\.tensor", body)
    assert len(re.findall(r"mov\.u64\s+%rd\d+, %globaltimer;", body)) == 9    # the start and the 8 barriers
    # A layer's gate_up weight starts at layer x 234,881,024 bytes: past 2**31 from layer 10, so
    # that offset must be formed in 64 bits (in 32 it wrapped, and the run read garbage).
    assert re.search(r"mad\.lo\.s64\s+%rd\d+, %rd\d+, 234881024,", body)


def test_tma_variant_reads_the_weights_by_tensor_copies(tmp_path):
    body = _ptx_body(tmp_path, "tma")
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d", body)) == 4      # qkv, o, gate_up, down
    assert re.search(r"mbarrier\.try_wait", body)


def test_tma_dot_kind_pipelines_the_weight_tiles_and_plain_fma_tma_does_not(tmp_path):
    # The H200 figures rest on this: with the product as a dot, Triton keeps several 8 KB weight
    # tiles in flight through shared memory; with FMAs one buffer, whatever the stages asked for.
    dot_shared, dot_ptx = _compiled(tmp_path, "tma-dot", stages=3)
    fma_shared, _ = _compiled(tmp_path, "tma", stages=3)
    tile = 32 * 128 * 2
    assert fma_shared < 2 * tile <= dot_shared, (fma_shared, dot_shared)
    assert re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32", dot_ptx)


def test_fold_takes_two_barriers_a_layer_out(tmp_path):
    # 8 barriers a layer, or 6 with the qkv and gate_up reduces folded into o and down: the
    # barrier's spin loop appears once a call site in the PTX.
    def polls(variant):
        return len(re.findall(r"ld\.global\.gpu\.acquire\.b32", _ptx_body(tmp_path, variant)))
    assert polls("tma-dot") == 8 * 2
    assert polls("fold") == 6 * 2


def test_attention_variant_writes_the_kv_and_runs_its_dots_inside(tmp_path):
    body = _ptx_body(tmp_path, "attn")
    # 9 barriers a layer: rope + KV write, attention and the merge besides the 6 of the folded products.
    assert len(re.findall(r"ld\.global\.gpu\.acquire\.b32", body)) == 9 * 2
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32", body)) >= 3
    assert re.search(r"ex2\.approx", body)                 # the softmax's exponentials


def test_paged_variant_reads_the_block_table_and_the_steps_length_on_the_device(tmp_path):
    def params(body):
        return {int(i) for i in re.findall(r"_layers_kernel_param_(\d+)\]", body)}
    plain, paged = _ptx_body(tmp_path, "attn"), _ptx_body(tmp_path, "paged")
    # Three more parameters read (the block table, the length, the slot), the slot as one 64-bit load.
    assert params(plain) < params(paged) and len(params(paged) - params(plain)) == 3
    assert not re.search(r"ld\.global(?:\.[a-z0-9]+)*\.b64", plain)
    assert len(re.findall(r"ld\.global(?:\.[a-z0-9]+)*\.b64", paged)) == 1


def test_attention_reads_the_block_table_a_chunk_ahead_whatever_the_split(tmp_path):
    # The table's entries for the next 64 tokens are loaded before the chunk's K and V: two load
    # sites of the table a split (the first chunk's before the loop, the next chunk's inside it),
    # each 64 scalar 32-bit loads in the PTX, besides the step's length; the split size moves only
    # the loop's bounds. (One site inside the loop, loading the chunk's own entries, gives 65.)
    def table_loads(body):
        return len(re.findall(r"ld\.global\.b32 ", body))
    paged, small = _ptx_body(tmp_path, "paged"), _ptx_body(tmp_path, "split128")
    assert table_loads(_ptx_body(tmp_path, "attn")) == 0
    assert table_loads(paged) == table_loads(small) == 1 + 2 * 64
    assert len(re.findall(r"ld\.global\.gpu\.acquire\.b32", small)) == 9 * 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU runs the benchmark instead of refusing")
def test_refuses_without_a_gpu():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        persistent.main([])


@pytest.mark.parametrize("text", ["2,32,128,16,8,2,16", "2,32,100,16,8,2,16,4", "0,32,128,16,8,2,16,4",
                                  "2,32,128,16,8,2,16,x", "", "2,32,128,16,8,2,16,4,1,4", "2,32,128,16,8,2,7,4",
                                  "2,32,128,16,8,2,16,4,1,3,2", "2,32,128,16,8,2,16,4,1,3,0,1",
                                  "2,32,128,16,8,2,16,4,1,3,1,3", "2,32,128,16,8,2,16,4,1,3,1,1,2",
                                  "2,32,128,16,8,2,16,4,1,3,1,1,100", "2,32,128,16,8,2,16,4,1,3,1,1,32",
                                  "2,32,128,16,8,2,16,4,1,3,1,1,384",
                                  "2,32,128,16,8,2,16,4,1,3,1,1,128,1"])
def test_configs_are_checked(text, capsys):
    with pytest.raises(SystemExit) as e:
        persistent.main(["--configs", text])
    assert e.value.code == 2
    assert "--configs" in capsys.readouterr().err


def test_config_fields_and_default_stages():
    cfg = persistent.parse_config("4,32,128,16,8,2,16,4")
    assert cfg == dict(per_sm=4, bk=32, bn=128, s_qkv=16, s_o=8, s_gu=2, s_d=16, warps=4, stages=1, kind=0, fold=0,
                       attn=0, split=256)
    assert persistent.parse_config("4,32,128,16,8,2,16,4,3,3,1,1,64") == dict(
        per_sm=4, bk=32, bn=128, s_qkv=16, s_o=8, s_gu=2, s_d=16, warps=4, stages=3, kind=3, fold=1, attn=1, split=64)
    assert persistent.parse_config("4,32,128,16,8,2,16,4,3,3,1")["fold"] == 1
    assert persistent.parse_config("4,32,128,16,8,2,16,4,3,3,1,1")["attn"] == 1
    assert persistent.parse_config("4,32,128,16,8,2,16,4,3")["stages"] == 3
    assert persistent.parse_config("4,32,128,16,8,2,16,4,3,3")["kind"] == 3
    assert len(persistent.config_list("1,32,256,8,8,1,16,8;2,16,128,8,8,1,8,4")) == 2
