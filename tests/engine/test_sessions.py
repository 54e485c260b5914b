"""Session KV reuse, export / import and LRU eviction."""
from __future__ import annotations

import pytest
import torch

from engine.errors import SessionError
from engine.runtime.llm import LLM, SessionState
from tests.engine.helpers import greedy


def test_session_reuse_gives_same_tokens_and_reports_cached(qwen3_dir, device):
    first = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]
    ref = LLM(qwen3_dir, device=device, kv_capacity_tokens=1024)
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=1024)
    try:
        r1 = llm.generate(first, greedy(6), session="s")
        assert r1.cached_tokens == 0 and llm.sessions() == ["s"]
        follow = first + r1.token_ids + [30, 31, 32]
        r2 = llm.generate(follow, greedy(6), session="s")
        assert r2.cached_tokens == len(first) + 6 - 1      # the last generated token had no KV yet
        assert r2.token_ids == ref.generate(follow, greedy(6)).token_ids
        # A prompt that shares only a prefix reuses just that prefix.
        r3 = llm.generate(first[:10] + [99, 98], greedy(4), session="s")
        assert r3.cached_tokens == 10
        assert r3.token_ids == ref.generate(first[:10] + [99, 98], greedy(4)).token_ids
    finally:
        llm.stop()
        ref.stop()


@pytest.mark.parametrize("kv_dtype", ["auto", "int8"])
def test_export_import_roundtrip(qwen3_dir, device, kv_dtype):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9]
    src = LLM(qwen3_dir, device=device, kv_dtype=kv_dtype, kv_capacity_tokens=512)
    dst = LLM(qwen3_dir, device=device, kv_dtype=kv_dtype, kv_capacity_tokens=512)
    try:
        r1 = src.generate(prompt, greedy(5), session="k")
        state = src.export_session("k")
        assert state.token_ids == prompt + r1.token_ids[:-1]
        n = len(state.token_ids)
        assert tuple(state.tensors["k"].shape) == (2, n, 2, 32)
        assert ("k_scale" in state.tensors) == (kv_dtype == "int8")
        dst.import_session("k", SessionState(list(state.token_ids), dict(state.tensors)))
        follow = prompt + r1.token_ids + [42]
        a = src.generate(follow, greedy(5), session="k")
        b = dst.generate(follow, greedy(5), session="k")
        assert b.cached_tokens == a.cached_tokens == n and b.token_ids == a.token_ids
        assert dst.drop_session("k") is True and dst.sessions() == []
        assert dst.drop_session("k") is False
        with pytest.raises(SessionError, match="no cached session"):
            dst.export_session("k")
    finally:
        src.stop()
        dst.stop()


def test_import_rejects_mismatched_state(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=256)
    with pytest.raises(SessionError, match="'k'"):
        llm.import_session("x", SessionState([1, 2], {"k": torch.zeros(2, 3, 2, 32)}))
    bad = {"k": torch.zeros(2, 2, 2, 16), "v": torch.zeros(2, 2, 2, 16)}
    with pytest.raises(SessionError, match="expected"):
        llm.import_session("x", SessionState([1, 2], bad))
    assert llm.sessions() == [] and llm.status()["blocks_used"] == 0


def test_idle_sessions_evicted_lru_when_pool_needs_blocks(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=64, block_size=16)   # 4 blocks
    try:
        llm.generate(list(range(1, 20)), greedy(4), session="old")     # keeps 2 blocks
        llm.generate(list(range(1, 10)), greedy(4), session="new")     # keeps 1 block
        assert llm.sessions() == ["old", "new"]
        llm.generate(list(range(1, 30)), greedy(10))                   # needs 3 blocks
        assert llm.sessions() == ["new"]
    finally:
        llm.stop()
