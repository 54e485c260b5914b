"""A long CPU prefill's row-wise work in blocks of rows (engine.model.transformer.ROW_BLOCK) gives
what one pass over all rows gives: the same logits within float32 rounding, the same greedy
token, the same KV written."""
from __future__ import annotations

import pytest
import torch

from engine.model import transformer
from engine.runtime.llm import LLM
from tests.engine.helpers import engine_logits


@pytest.mark.parametrize("n", [1, 7, 1024, 1025, 2048, 2049, 7400])
def test_row_blocks_cover_the_rows_in_near_equal_blocks(n):
    blocks = transformer.row_blocks(n)
    assert blocks[0][0] == 0 and blocks[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))          # contiguous, no overlap
    sizes = [e - s for s, e in blocks]
    assert max(sizes) <= transformer.ROW_BLOCK
    assert len(blocks) == -(-n // transformer.ROW_BLOCK)                   # as few as the cap allows
    assert max(sizes) - min(sizes) <= len(blocks)                         # no short last block


def _prefill(model_dir, ids, kv_dtype, row_block, monkeypatch):
    monkeypatch.setattr(transformer, "ROW_BLOCK", row_block)
    llm = LLM(model_dir, device="cpu", dtype="float32", kv_dtype=kv_dtype, kv_capacity_tokens=256,
              max_concurrency=1, max_model_len=200)
    try:
        logits = engine_logits(llm, ids)
        caches = [t.clone() for c in llm.runner.caches for t in c if t is not None]
    finally:
        llm.stop()
    return logits, caches


@pytest.mark.parametrize("kv_dtype", ["float32", "int8"])
def test_blocked_prefill_matches_one_pass(tiny_dir, kv_dtype, monkeypatch):
    ids = [(7 * i + 3) % 200 + 1 for i in range(150)]
    whole, whole_kv = _prefill(tiny_dir, ids, kv_dtype, 10 ** 9, monkeypatch)
    blocked, blocked_kv = _prefill(tiny_dir, ids, kv_dtype, 16, monkeypatch)   # 10 blocks of 15 rows
    assert blocked.shape == whole.shape == (150, whole.shape[1])
    torch.testing.assert_close(blocked, whole, rtol=1e-5, atol=1e-5)
    assert torch.equal(blocked.argmax(-1), whole.argmax(-1))
    assert len(blocked_kv) == len(whole_kv) > 0
    for b, w in zip(blocked_kv, whole_kv):
        if w.dtype == torch.int8:      # a k or v row rounds to the same int8 but at a rounding edge
            assert (b.int() - w.int()).abs().max() <= 1
            assert (b != w).float().mean() < 1e-3
        else:
            torch.testing.assert_close(b, w, rtol=1e-5, atol=1e-6)


def test_short_prefills_and_cuda_take_one_pass(tiny_dir, monkeypatch):
    """At or under ROW_BLOCK rows the model runs as before: no block loop at all."""
    calls = []
    real = transformer.row_blocks
    monkeypatch.setattr(transformer, "row_blocks", lambda n: calls.append(n) or real(n))
    _prefill(tiny_dir, list(range(1, 33)), "float32", 32, monkeypatch)
    assert calls == []
    _prefill(tiny_dir, list(range(1, 34)), "float32", 32, monkeypatch)
    assert calls and set(calls) == {33}
