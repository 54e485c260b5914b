"""Continuous batching over the paged pool: isolation, admission, queue limits, cancellation."""
from __future__ import annotations

import time

import pytest

from engine.errors import AdmissionError, PendingTimeout, QueueFull
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams
from tests.engine.helpers import greedy


def test_interleaved_requests_match_solo_runs(qwen3_dir, device):
    reqs = [([3 + i, 40 + 2 * i, 7] * (1 + i % 4), 5 + 3 * i) for i in range(10)]   # mixed lengths
    solo = LLM(qwen3_dir, device=device, kv_capacity_tokens=2048, max_concurrency=1, prefill_chunk=8)
    try:
        alone = [solo.generate(p, greedy(n)).token_ids for p, n in reqs]
    finally:
        solo.stop()
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=2048, max_concurrency=4, prefill_chunk=3)
    try:
        handles = [llm.submit(p, greedy(n)) for p, n in reqs]
        together = [h.result(60).token_ids for h in handles]
        assert llm.status()["blocks_used"] == 0          # every block came back
    finally:
        llm.stop()
    assert together == alone
    assert [len(t) for t in together] == [n for _, n in reqs]


def test_seeded_sampling_independent_of_batch(qwen3_dir, device):
    params = SamplingParams(max_new_tokens=12, temperature=0.8, top_p=0.9, seed=42, ignore_eos=True)
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=2048, max_concurrency=8)
    try:
        alone = llm.generate([5, 6, 7], params).token_ids
        others = [llm.submit([9, 9, i], SamplingParams(max_new_tokens=12, temperature=1.0, seed=i)) for i in range(5)]
        again = llm.submit([5, 6, 7], params).result(60).token_ids
        other_seed = llm.generate([5, 6, 7], SamplingParams(max_new_tokens=12, temperature=0.8, top_p=0.9,
                                                            seed=43, ignore_eos=True)).token_ids
        for h in others:
            h.result(60)
    finally:
        llm.stop()
    assert again == alone
    assert other_seed != alone


def test_admission_refused_when_it_can_never_fit(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=64, block_size=16)   # 4 blocks
    try:
        with pytest.raises(AdmissionError) as e:
            llm.submit(list(range(1, 60)), greedy(10))    # 69 tokens -> 5 blocks
        assert e.value.needed_blocks == 5 and e.value.total_blocks == 4
        assert "5 KV blocks" in str(e.value) and "4 blocks" in str(e.value)
        assert llm.generate(list(range(1, 40)), greedy(8)).finish_reason == "length"   # 47 tokens fit
    finally:
        llm.stop()


def test_pending_timeout_and_queue_full(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=256, max_concurrency=1, max_pending=2,
              pending_timeout_s=0.3)
    try:
        # Holding the engine's lock stops its scheduling thread, so both requests stay pending
        # however fast the machine is.
        with llm.paused():
            a = llm.submit([1, 2, 3], greedy(4))
            b = llm.submit([4, 5, 6], greedy(4))
            with pytest.raises(QueueFull) as e:
                llm.submit([1, 2], greedy(2))
            assert e.value.max_pending == 2
            time.sleep(0.4)
        for h in (a, b):
            with pytest.raises(PendingTimeout) as e2:
                h.result(10)
            assert e2.value.waited_s > 0.3 and e2.value.limit_s == 0.3
        with pytest.raises(PendingTimeout):
            list(a.stream())
        assert llm.generate([1, 2, 3], greedy(4)).finish_reason == "length"   # the queue drained
    finally:
        llm.stop()


def test_cancel_frees_blocks(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=256)
    try:
        h = llm.submit([1, 2, 3], SamplingParams(max_new_tokens=200, ignore_eos=True))
        it = h.stream()
        got = [next(it) for _ in range(3)]
        h.cancel()
        res = h.result(30)
        assert res.finish_reason == "cancelled"
        assert res.token_ids[:3] == got and len(res.token_ids) < 200
        assert llm.status()["blocks_used"] == 0
    finally:
        llm.stop()


def test_bad_requests_are_named(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=256)
    try:
        with pytest.raises(ValueError, match="empty"):
            llm.submit([], greedy(2))
        with pytest.raises(ValueError, match="outside the vocabulary"):
            llm.submit([1, 99999], greedy(2))
        with pytest.raises(ValueError, match="max_new_tokens"):
            SamplingParams(max_new_tokens=0)
        with pytest.raises(ValueError, match="top_p"):
            SamplingParams(top_p=0.0)
    finally:
        llm.stop()
    with pytest.raises(ValueError, match="kv_budget_bytes"):
        LLM(qwen3_dir, device=device, kv_budget_bytes=10)


def test_budget_bytes_sizes_pool(qwen3_dir, device):
    from engine.runtime.kv_pool import block_bytes
    llm = LLM(qwen3_dir, device=device, kv_budget_bytes=1 << 20, kv_dtype="int8")
    per = block_bytes(llm.config, 16, llm.kv_dtype)
    assert llm.pool.num_blocks == (1 << 20) // per - 1


def test_a_failing_step_fails_its_requests_instead_of_hanging(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=256)
    try:
        def broken(seqs):
            raise RuntimeError("decode exploded")
        llm.runner.decode = broken      # an injected fault: no real op fails on demand
        h = llm.submit([1, 2, 3], greedy(5))
        with pytest.raises(RuntimeError, match="decode exploded"):
            h.result(30)
        assert llm.status()["blocks_used"] == 0
    finally:
        llm.stop()
