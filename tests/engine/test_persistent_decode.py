"""engine.runtime.persistent_decode without a GPU: which models and pools the persistent batch-1
step takes (and why not the others), the stacked weights it makes (views with the layout the
products read, outputs unchanged), its split-K choices; and its kernel
(engine.kernels.triton_persistent) compiled offline for sm_90, as the H200 runs it.
The step itself runs on the GPU: tests/engine/test_persistent_decode_gpu.py."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.benchmarks.decode import LLAMA_8B, hf_model
from engine.model.config import ModelConfig
from engine.model.layout import set_projection_layout
from engine.model.transformer import AttnMeta
from engine.model.weights import build_model
from engine.runtime import persistent_decode as pd
from engine.runtime.kv_pool import KVPool

REPO = Path(__file__).resolve().parents[2]
# The smallest Llama shape the kernel takes: head_dim 128, two q heads on one kv head.
SMALL = dict(LLAMA_8B, vocab_size=512, hidden_size=256, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, intermediate_size=512)
CUDA = torch.device("cuda")      # a device type only: unfit asks nothing of it when given the capability


def _model(shape: dict, dtype=torch.bfloat16):
    cfg = ModelConfig.from_dict(shape, where="test shape")
    model = build_model(cfg, dict(hf_model(shape, "cpu").state_dict()), dtype, torch.device("cpu"), 256, "test")
    set_projection_layout(model, column_major=True)        # the layout build_model gives CUDA weights
    return cfg, model


@pytest.fixture(scope="module")
def small():
    return _model(SMALL)


def test_a_llama_shape_with_a_bf16_pool_on_sm90_fits(small):
    cfg, model = small
    pool = KVPool(cfg, 8, 16, torch.bfloat16, "cpu")
    assert pd.unfit(model, pool, CUDA, (9, 0)) is None


def test_each_unfit_case_names_its_reason(small, monkeypatch):
    cfg, model = small
    pool = KVPool(cfg, 8, 16, torch.bfloat16, "cpu")
    assert pd.unfit(model, pool, torch.device("cpu"), (9, 0)) == "not a CUDA device"
    assert "sm_90" in pd.unfit(model, pool, CUDA, (8, 0))
    assert "bf16 KV cache" in pd.unfit(model, KVPool(cfg, 8, 16, torch.int8, "cpu"), CUDA, (9, 0))
    monkeypatch.setenv(pd.ENV, "0")
    assert pd.unfit(model, pool, CUDA, (9, 0)) == f"{pd.ENV}=0"
    monkeypatch.delenv(pd.ENV)
    # The engine's tiny test shape: head_dim 64.
    cfg64, model64 = _model(dict(SMALL, num_attention_heads=4, num_key_value_heads=2))
    assert "head_dim 128" in pd.unfit(model64, KVPool(cfg64, 8, 16, torch.bfloat16, "cpu"), CUDA, (9, 0))
    # A row-major weight (as the CPU keeps the down projection) is not what the descriptors read.
    model.layers[1].mlp.down.weight = torch.nn.Parameter(model.layers[1].mlp.down.weight.contiguous(),
                                                         requires_grad=False)
    try:
        assert pd.unfit(model, pool, CUDA, (9, 0)) == "mlp.down: needs a bias-free, column-major torch.bfloat16 weight"
    finally:
        set_projection_layout(model, column_major=True)


def test_stacking_makes_each_layer_weight_a_view_and_changes_no_output():
    cfg, model = _model(SMALL, torch.float32)
    pool = KVPool(cfg, 8, 16, torch.float32, "cpu")
    ids, pos = torch.tensor([5, 17, 3]), torch.arange(3)
    meta = AttnMeta(slot_mapping=torch.arange(3), decode=False, block_table=torch.tensor([0], dtype=torch.int32))

    def logits():
        from engine.kernels import ops
        return model(ids, pos, meta, ops.select("cpu", "torch"), pool.layer_caches())
    before = logits()
    strides = [layer.mlp.gate_up.weight.stride() for layer in model.layers]
    stack = pd._stacked(model, "mlp.gate_up")
    assert stack.shape == (2, 256, 1024) and stack.is_contiguous()
    for n, layer in enumerate(model.layers):
        w = layer.mlp.gate_up.weight
        assert w.data_ptr() == stack[n].data_ptr() and w.stride() == strides[n] == (1, 1024)
    assert pd._stacked(model, "mlp.gate_up") is stack           # made once
    assert torch.equal(logits(), before)


def test_split_k_halves_until_it_tiles():
    assert pd._split(4096, 16) == 16
    assert pd._split(14336, 8) == 8
    assert pd._split(1536, 16) == 8          # 1536 = 24 x 64: 16 splits leave 1.5 tiles each
    assert pd._split(64, 8) == 1


_COMPILE = """
import json
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
from engine.kernels import triton_persistent as m
from engine.runtime import persistent_decode as pd
desc = f"tensordesc<bf16[1,{pd.BK},{pd.BN}]>"
sig = dict(r_ptr="*fp32", n1_ptr="*bf16", n2_ptr="*bf16", dqkv=desc, do=desc, dgu=desc, dd=desc, p_ptr="*fp32",
           p2_ptr="*fp32", q_ptr="*bf16", sync_ptr="*i32", kc_ptr="*bf16", vc_ptr="*bf16", layer_stride="i64",
           cos_ptr="*bf16", sin_ptr="*bf16", att_o="*fp32", att_ml="*fp32", sm_scale="fp32", eps="fp32",
           table_ptr="*i32", lens_ptr="*i32", slot_ptr="*i64")
consts = dict(LAYERS=32, H=4096, I=14336, HEADS=32, KV=8, D=128, PAGE=16, S_QKV=16, S_O=8, S_GU=1, S_D=8,
              BK=pd.BK, BN=pd.BN, BR=pd.BR, SPLIT_MIN=pd.SPLIT_MIN, NS2=pd.MAX_SPLITS)
sig.update({c: "constexpr" for c in consts})
k = compile(ASTSource(fn=m.decode_layers_kernel, signature=sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
            options={"num_warps": pd.WARPS, "num_stages": pd.STAGES})
assert k.asm["cubin"], "ptxas gave no cubin"
ptx = k.asm["ptx"]
print(json.dumps(dict(shared=k.metadata.shared)))
print(ptx[ptx.index(".entry"):])
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[dict, str]:
    """The 8B shape's kernel compiled for sm_90 in a fresh process (this one interprets Triton)."""
    import json
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton"))
    run = subprocess.run([sys.executable, "-c", _COMPILE], env=env, cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    head, ptx = run.stdout.split("\n", 1)
    return json.loads(head), ptx


def test_kernel_passes_nine_barriers_a_layer_with_bounded_spins(compiled):
    _, ptx = compiled
    # Each barrier site polls twice (its first look, then the loop); nine phases a layer, the
    # layer loop compiled once.
    assert len(re.findall(r"ld\.global\.gpu\.acquire\.b32", ptx)) == 9 * 2
    assert re.search(r"setp\.lt\.u32\s+%p\d+, %r\d+, 65535;", ptx)          # the bounded spin
    assert re.search(r"atom\.global\.gpu\.acq_rel\.max\.s32", ptx)            # ... that marks the run failed


def test_kernel_reads_weight_tiles_by_tma_into_pipelined_dots(compiled):
    meta, ptx = compiled
    assert re.search(r"cp\.async\.bulk\.tensor\.3d", ptx)                     # the [L, K, N] descriptors
    assert re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32", ptx)
    tile = 64 * 128 * 2
    # Three stages of 16 KB tiles in shared memory, and two programs still fit an SM (228 KB).
    assert 2 * tile <= meta["shared"] and 2 * (meta["shared"] + 1024) <= 228 * 1024, meta


def test_kernel_reads_the_block_table_a_chunk_ahead(compiled):
    _, ptx = compiled
    # Two load sites of the table a split (the first chunk's, and the next chunk's inside the loop),
    # 64 scalar 32-bit loads each, besides the sequence's length: 65 with the table read per chunk.
    assert len(re.findall(r"ld\.global\.b32 ", ptx)) == 1 + 2 * 64


def test_a_set_failure_flag_fails_the_token_read():
    # The host's copy of the persistent kernel's failure flag, read with a step's tokens: clear, the
    # tokens come back; set, DecodeKernelFailed names the switch that turns the step off.
    from engine.errors import DecodeKernelFailed
    from engine.runtime.model_runner import PendingTokens
    ids = torch.tensor([7, 9])
    assert PendingTokens([], ids, None, torch.zeros(1, dtype=torch.int32)).tolist() == [7, 9]
    with pytest.raises(DecodeKernelFailed, match="ENGINE_PERSISTENT_DECODE=0"):
        PendingTokens([], ids, None, torch.ones(1, dtype=torch.int32)).tolist()
