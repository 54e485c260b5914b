"""Repetition penalties and log-probabilities, checked against a direct computation over the
engine's own full-window logits of the tiny model."""
from __future__ import annotations

import pytest
import torch

from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams
from tests.engine.helpers import engine_logits, greedy

PROMPT = [2, 5]          # the tiny qwen3 model repeats one token after this prompt
N = 12


@pytest.fixture(scope="module")
def llm(qwen3_dir):
    from tests.engine.conftest import DEVICE
    engine = LLM(qwen3_dir, device=DEVICE, kv_capacity_tokens=2048, max_concurrency=4)
    yield engine
    engine.stop()


def _reference(llm, params: SamplingParams) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy decoding one token at a time over the full window, penalties applied by hand
    from their definitions; the log-softmax of each step's penalised row."""
    out, rows = [], []
    for _ in range(params.max_new_tokens):
        row = engine_logits(llm, PROMPT + out)[-1].double()
        seen = set(PROMPT) | set(out)
        for t in seen:
            r = params.repetition_penalty
            row[t] = row[t] / r if row[t] > 0 else row[t] * r
        for t in set(out):
            row[t] -= out.count(t) * params.frequency_penalty + params.presence_penalty
        rows.append(torch.log_softmax(row, -1))
        out.append(int(torch.argmax(row)))
    return out, rows


def test_zero_penalties_are_byte_identical(llm):
    plain = llm.generate(PROMPT, greedy(N)).token_ids
    zero = llm.generate(PROMPT, greedy(N, presence_penalty=0.0, frequency_penalty=0.0,
                                       repetition_penalty=1.0)).token_ids
    assert zero == plain
    assert len(set(plain)) <= 2           # the continuation repeats: penalties have work to do
    assert SamplingParams(presence_penalty=0.0, frequency_penalty=0.0).plain


@pytest.mark.parametrize("kw", [dict(frequency_penalty=1.5), dict(presence_penalty=2.0),
                                dict(repetition_penalty=1.8), dict(frequency_penalty=-0.5),
                                dict(presence_penalty=0.7, frequency_penalty=0.4, repetition_penalty=1.2)])
def test_penalty_matches_its_definition(llm, kw):
    params = greedy(N, **kw)
    got = llm.generate(PROMPT, params).token_ids
    want, _ = _reference(llm, params)
    assert got == want
    plain = llm.generate(PROMPT, greedy(N)).token_ids
    assert got != plain
    if kw.get("frequency_penalty", 0) < 0:
        assert _longest_run(got) > _longest_run(plain)     # a negative penalty: more repetition
    else:
        assert _longest_run(got) < _longest_run(plain)


def _longest_run(ids: list[int]) -> int:
    best = run = 1
    for a, b in zip(ids, ids[1:]):
        run = run + 1 if a == b else 1
        best = max(best, run)
    return best


def test_penalties_range_checked():
    for kw in (dict(presence_penalty=2.5), dict(frequency_penalty=-2.1), dict(repetition_penalty=0.0)):
        with pytest.raises(ValueError, match=next(iter(kw))):
            SamplingParams(**kw)
    with pytest.raises(ValueError, match="logprobs"):
        SamplingParams(logprobs=21)


@pytest.mark.parametrize("n", [0, 1, 5, 20])
def test_logprobs_equal_log_softmax_of_the_logits(llm, n):
    res = llm.generate(PROMPT, greedy(N, logprobs=n))
    want_ids, rows = _reference(llm, greedy(N))
    assert res.token_ids == want_ids == llm.generate(PROMPT, greedy(N)).token_ids
    assert len(res.logprobs) == N
    for tok, lp, ref in zip(res.token_ids, res.logprobs, rows):
        assert lp.token_id == tok
        assert lp.logprob == pytest.approx(float(ref[tok]), abs=1e-4)
        assert len(lp.top) == n
        vals, ids = torch.topk(ref, n)
        assert [t for t, _ in lp.top][:1] == ids.tolist()[:1]
        assert [v for _, v in lp.top] == pytest.approx(vals.tolist(), abs=1e-4)
        assert all(a >= b for (_, a), (_, b) in zip(lp.top, lp.top[1:]))


def test_logprobs_are_before_temperature_and_after_penalties(llm):
    params = SamplingParams(max_new_tokens=6, temperature=0.7, seed=11, ignore_eos=True,
                            frequency_penalty=1.0, logprobs=3)
    res = llm.generate(PROMPT, params)
    out = []
    for tok, lp in zip(res.token_ids, res.logprobs):
        row = engine_logits(llm, PROMPT + out)[-1].double()
        for t in set(out):
            row[t] -= out.count(t) * 1.0
        ref = torch.log_softmax(row, -1)      # no temperature: the model's distribution
        assert lp.logprob == pytest.approx(float(ref[tok]), abs=1e-4)
        out.append(tok)
    again = llm.generate(PROMPT, params)
    assert again.token_ids == res.token_ids    # seeded: the record does not disturb sampling


def test_logprobs_with_spec_and_in_batch(qwen3_dir, device):
    """A request asking for logprobs is never speculated (its rows are all read); its tokens
    equal the plain greedy ones, next to plain requests in the same batch."""
    engine = LLM(qwen3_dir, device=device, kv_capacity_tokens=2048, max_concurrency=4, spec="ngram")
    try:
        hs = [engine.submit(PROMPT, greedy(N, logprobs=2)), engine.submit(PROMPT, greedy(N)),
              engine.submit([7, 7, 7, 7], greedy(N, presence_penalty=1.0))]
        res = [h.result(60) for h in hs]
    finally:
        engine.stop()
    assert res[0].token_ids == res[1].token_ids
    assert len(res[0].logprobs) == N and res[1].logprobs == []
    assert res[2].stats["spec"]["attempted"] == [0] * len(res[2].stats["spec"]["attempted"])
