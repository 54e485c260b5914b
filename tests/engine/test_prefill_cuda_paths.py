"""The CUDA prefill's own choices: its attention never runs cuDNN attention (which SDPA prefers on
Hopper, and whose plans torch builds per thread and shape), and a short pass
takes the eager elementwise ops, whose logits stay within a few percent of the compiled ones'.
On the CPU these skip; the routing itself is tested there (test_fused_ops.py)."""
from __future__ import annotations

import pytest
import torch

from engine.model import fused
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA prefill paths")


def _engine(tiny_dir, device):
    if device != "cuda":
        pytest.skip("ENGINE_TEST_DEVICE=cuda runs it")
    return LLM(str(tiny_dir), device="cuda", dtype="bfloat16", max_model_len=512, kv_capacity_tokens=1024,
               max_concurrency=1)


def test_prefill_attention_runs_no_cudnn_kernel(tiny_dir, device):
    from torch.profiler import ProfilerActivity, profile

    llm = _engine(tiny_dir, device)
    try:
        params = SamplingParams(max_new_tokens=2, ignore_eos=True)
        llm.generate(list(range(3, 40)), params)                       # compiles and warms
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            llm.generate(list(range(5, 70)), params)                   # one chunk from position 0
            torch.cuda.synchronize()
        names = [e.key.lower() for e in prof.key_averages()]
    finally:
        llm.stop()
    assert not [n for n in names if "cudnn" in n], names
    assert [n for n in names if "flash" in n or "fmha" in n], names    # the fused attention kernel ran


def test_a_short_pass_takes_the_eager_ops_within_rounding(tiny_dir, device, monkeypatch):
    from types import SimpleNamespace

    llm = _engine(tiny_dir, device)
    seen = []
    real = fused.prefer_eager
    monkeypatch.setattr(fused, "prefer_eager",
                        lambda rows, decode, on_cuda: seen.append(real(rows, decode, on_cuda)) or seen[-1])
    prompt = list(range(3, 60))
    try:
        assert fused.is_compiled()
        seq = SimpleNamespace(blocks=llm.blocks.allocate(llm.blocks.blocks_needed(len(prompt))), kv_len=0)

        def last_logits(threshold):
            monkeypatch.setattr(fused, "EAGER_PREFILL_ROWS", threshold)
            with llm.paused():
                return llm.runner.run_window(seq, prompt, all_logits=False).clone()

        eager, compiled = last_logits(len(prompt) + 1), last_logits(0)
    finally:
        llm.blocks.reset()
        llm.stop()
    assert seen == [True, False]                  # the same pass: eager ops under the threshold only
    # Each eager op is within bf16 rounding of its compiled twin (test_fused_ops.py), but the eager
    # ones round between steps and a random tiny model carries those ulps through every layer, so
    # the pass is compared as a whole: a miswired op (a wrong RoPE half, a norm on the wrong
    # axis) moves the logits by about their own size, not by a few percent.
    rel = float((eager - compiled).norm() / compiled.norm())
    assert rel < 0.1, f"eager and compiled logits differ by {rel:.3f} of their norm"
