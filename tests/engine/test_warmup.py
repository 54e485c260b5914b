"""The prefill warm-up at start (engine.runtime.warmup): which passes, and that it leaves the pool
as it found it and every later output unchanged."""
from __future__ import annotations

import threading

import pytest

from engine.runtime import llm as llm_module

from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams
from engine.runtime.warmup import SHORT_ROWS, TAIL_ROWS, plan, warm_prefill


def test_plan_fits_the_context_and_the_pool():
    assert plan(2048, 8192, 65536) == [(0, 2048), (0, SHORT_ROWS), (2048, TAIL_ROWS)]
    assert plan(2048, 1000, 65536) == [(0, 1000), (0, SHORT_ROWS)]          # no room after a full chunk
    assert plan(32, 256, 4096) == [(0, 32), (32, TAIL_ROWS)]                # a short chunk: one short pass
    assert plan(256, 256, 100) == [(0, 100), (0, SHORT_ROWS)]               # the pool bounds it too


def _engine(model_dir, device, warmup):
    return LLM(str(model_dir), device=device, max_model_len=256, kv_capacity_tokens=1024, prefill_chunk=64,
               max_concurrency=2, warmup=warmup)


def test_warmup_leaves_pool_and_outputs_as_they_were(tiny_dir, device):
    cold, warm = _engine(tiny_dir, device, False), _engine(tiny_dir, device, True)
    try:
        assert cold.status()["warmup"] is None
        st = warm.status()
        assert st["warmup"]["passes"] == [[0, 64], [64, TAIL_ROWS]] and st["warmup"]["seconds"] >= 0
        assert warm.blocks.used_blocks == 0 and list(warm.blocks._free) == list(range(warm.blocks.num_blocks))
        # The scheduling thread ran the passes, the one that later serves the requests.
        assert warm.warmup.thread == "engine-scheduler" and warm._thread.name == "engine-scheduler"
        assert cold._thread is None               # no warm-up: the thread starts with the first request
        prompts = [[5, 9, 11, 3] * 10, list(range(3, 140))]       # one chunk; three chunks over a prefix
        for prompt in prompts:
            greedy = SamplingParams(max_new_tokens=12, ignore_eos=True)
            assert warm.generate(prompt, greedy).token_ids == cold.generate(prompt, greedy).token_ids
            sampled = SamplingParams(max_new_tokens=12, temperature=0.9, seed=7, ignore_eos=True)
            assert warm.generate(prompt, sampled).token_ids == cold.generate(prompt, sampled).token_ids
    finally:
        cold.stop()
        warm.stop()


def test_warmup_by_default_on_cuda_only(tiny_dir, device):
    llm = LLM(str(tiny_dir), device=device, max_model_len=256, kv_capacity_tokens=1024, prefill_chunk=64)
    try:
        assert (llm.status()["warmup"] is not None) == (device == "cuda")
    finally:
        llm.stop()


def test_warmup_refuses_a_pool_in_use(tiny_dir, device):
    llm = _engine(tiny_dir, device, False)
    try:
        held = llm.blocks.allocate(2)
        with pytest.raises(RuntimeError, match="empty KV pool"):
            warm_prefill(llm.runner, llm.blocks, 64, 256, llm.config.vocab_size)
        assert llm.blocks.used_blocks == len(held) == 2
    finally:
        llm.stop()


def test_a_failed_warmup_fails_the_constructor_and_stops_its_thread(tiny_dir, device, monkeypatch):
    def broken(*args):
        raise RuntimeError("warm-up pass failed")
    monkeypatch.setattr(llm_module, "warm_prefill", broken)      # a fault in the pass, injected
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="warm-up pass failed"):
        _engine(tiny_dir, device, True)
    left = [t for t in threading.enumerate() if t.ident not in before and t.name == "engine-scheduler"]
    assert left == []
