"""The prefill chunk the engine takes by default, and the memory bound admission keeps for one
prefill pass (ModelConfig.prefill_pass_bytes): its terms, and on CUDA that a real pass stays
inside it."""
from __future__ import annotations

import pytest
import torch

from engine.model.config import ModelConfig
from engine.runtime.llm import LLM
from engine.runtime.prefill_chunk import CUDA_PREFILL_CHUNK, default_prefill_chunk
from engine.runtime.sampling import SamplingParams

# Llama-3-8B's shapes (the GPU lane's benchmark model).
LLAMA_8B = ModelConfig(arch="llama", vocab_size=128256, hidden_size=4096, num_layers=32, num_heads=32,
                       num_kv_heads=8, head_dim=128, intermediate_size=14336)


def test_default_chunk_by_device():
    assert CUDA_PREFILL_CHUNK == 2048
    assert default_prefill_chunk("cuda", 8192) == 2048
    assert default_prefill_chunk("cuda", 1000) == 1000          # never past the context
    assert default_prefill_chunk("cpu", 8192) == 8192           # the CPU: the whole prompt in one pass


def test_prefill_pass_bytes_terms():
    per_row = 4 * 4096 + (32 + 16) * 128 + 2 * 32 * 128 + 3 * 14336          # 73,728 values a row
    bf16 = LLAMA_8B.prefill_pass_bytes(2048, 8192, 2, 2)
    assert bf16 == (2048 * per_row * 2                # the layer's row-wise tensors
                    + 2 * 8192 * 8 * 128 * 2          # K and V gathered from the pool
                    + 2 * 8192 * 32 * 128 * 2         # ... repeated for the 32 q heads
                    + 128256 * (4 + 2))               # the last row's logits
    assert bf16 == 470_531_584
    # an int8 pool is gathered at a byte a value, then dequantised to float32
    assert LLAMA_8B.prefill_pass_bytes(2048, 8192, 2, 1) - bf16 == 2 * 8192 * 8 * 128 * (1 + 4 - 2)
    # the rows scale the row-wise part only
    assert bf16 - LLAMA_8B.prefill_pass_bytes(256, 8192, 2, 2) == (2048 - 256) * per_row * 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs the CUDA allocator's peak statistics")
def test_a_prefill_pass_stays_inside_its_bound(tiny_dir, device):
    if device != "cuda":
        pytest.skip("ENGINE_TEST_DEVICE=cuda runs it")
    ctx = 1024
    llm = LLM(str(tiny_dir), device="cuda", dtype="bfloat16", max_model_len=ctx, kv_capacity_tokens=2 * ctx,
              max_concurrency=1)
    try:
        assert llm.scheduler.prefill_chunk == min(CUDA_PREFILL_CHUNK, ctx)
        params = SamplingParams(max_new_tokens=2, ignore_eos=True)
        llm.generate(list(range(3, 40)), params)          # compiles and warms: cuBLAS workspaces, graphs
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        g = torch.Generator().manual_seed(0)
        llm.generate(torch.randint(3, llm.config.vocab_size, (ctx - 8,), generator=g).tolist(), params)
        torch.cuda.synchronize()
        used = torch.cuda.max_memory_allocated() - base
        bound = llm.config.prefill_pass_bytes(ctx, ctx, 2, 2)
        assert 0 < used <= bound, (used, bound)
    finally:
        llm.stop()
