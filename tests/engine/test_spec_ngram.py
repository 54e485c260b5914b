"""N-gram speculative decoding: byte-identical to plain greedy, acceptance counted per position."""
from __future__ import annotations

import random

import pytest

from engine.runtime import spec_ngram
from engine.runtime.llm import LLM
from tests.engine.helpers import greedy


def test_propose_finds_latest_ngram():
    toks = [1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3]
    assert spec_ngram.propose(toks, 2) == [7, 8]        # the most recent earlier "1 2 3"
    assert spec_ngram.propose([5, 6, 7], 3) == []
    assert spec_ngram.propose([4, 4], 3) == [4]
    with pytest.raises(ValueError, match="1..15"):
        spec_ngram.propose(toks, 16)


def _scan(tokens, k, max_n=3):
    """The plain backwards scan the index replaces."""
    for n in range(min(max_n, len(tokens) - 1), 0, -1):
        tail = tokens[len(tokens) - n:]
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start:start + n] == tail:
                return tokens[start + n:start + n + k]
    return []


def test_incremental_index_equals_backwards_scan():
    rng = random.Random(0)
    for _ in range(200):
        toks = [rng.randrange(6) for _ in range(rng.randint(1, 50))]
        idx = spec_ngram.NgramIndex()
        for n in range(1, len(toks) + 1):
            assert idx.propose(toks[:n], 5) == _scan(toks[:n], 5), toks[:n]


def test_accept_greedy():
    assert spec_ngram.accept_greedy([1, 2, 3], [1, 2, 4, 5]) == 2
    assert spec_ngram.accept_greedy([1], [0, 9]) == 0
    assert spec_ngram.accept_greedy([1, 2], [1, 2, 3]) == 2


def _prompts(n: int) -> list[list[int]]:
    rng = random.Random(1234)
    out = []
    for i in range(n):
        base = [rng.randrange(0, 300) for _ in range(rng.randint(2, 6))]
        # Half the prompts repeat a phrase, so that n-grams recur and drafts get accepted.
        out.append(base * rng.randint(2, 4) if i % 2 == 0 else base + [rng.randrange(0, 300) for _ in range(5)])
    return out


def test_speculative_equals_plain_greedy_over_50_prompts(qwen3_dir, llama_dir, device):
    prompts = _prompts(26)
    for d in (qwen3_dir, llama_dir):
        plain = LLM(d, device=device, kv_capacity_tokens=4096, max_concurrency=4)
        spec = LLM(d, device=device, kv_capacity_tokens=4096, max_concurrency=4, spec="ngram", draft_tokens=7)
        try:
            hp = [plain.submit(p, greedy(24)) for p in prompts]
            hs = [spec.submit(p, greedy(24)) for p in prompts]
            for p, a, b in zip(prompts, hp, hs):
                assert b.result(60).token_ids == a.result(60).token_ids, p
            counters = spec.status()["spec"]
        finally:
            plain.stop()
            spec.stop()
        assert len(counters["attempted"]) == 7
        assert counters["attempted"][0] > 0 and counters["accepted"][0] > 0, counters
        assert all(acc <= att for acc, att in zip(counters["accepted"], counters["attempted"]))
        # A later draft position is attempted no more often than an earlier one.
        assert counters["attempted"] == sorted(counters["attempted"], reverse=True)


def test_per_request_spec_stats(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=1024, spec="ngram", draft_tokens=4)
    try:
        res = llm.generate([7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8], greedy(20))
    finally:
        llm.stop()
    spec = res.stats["spec"]
    assert len(spec["attempted"]) == 4 and spec["attempted"][0] > 0
    assert len(res.token_ids) == 20
