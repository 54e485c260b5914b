"""The sampler itself is safe with settings that underflow float32, and a fault in one
request's processing fails that request only."""
from __future__ import annotations

import pytest
import torch

from engine.errors import RequestFailed
from engine.runtime.llm import LLM
from engine.runtime.sampling import SamplingParams, make_generator, sample_row
from tests.engine.helpers import greedy

ROW = torch.tensor([50.0, 300.0, -100.0, 290.0, 299.9])


@pytest.mark.parametrize("temperature", [1e-45, 1e-46, 1e-320, 5e-324])
def test_underflowing_temperature_is_greedy(temperature):
    p = SamplingParams(temperature=temperature, seed=1)
    assert p.greedy                      # below float32's smallest normal: argmax
    assert make_generator(p) is None
    assert sample_row(ROW, p, make_generator(p)) == 1


@pytest.mark.parametrize("temperature", [1e-37, 2e-38])
def test_tiny_normal_temperature_does_not_overflow(temperature):
    # logits / T overflows float32 to inf here; the top token must still win, every time
    p = SamplingParams(temperature=temperature, seed=3)
    assert not p.greedy
    assert torch.isinf(ROW / temperature).any()
    g = make_generator(p)
    assert [sample_row(ROW, p, g) for _ in range(20)] == [1] * 20


@pytest.mark.parametrize("top_p", [1e-45, 1e-46, 1e-320])
def test_underflowing_top_p_keeps_the_top_token(top_p):
    p = SamplingParams(temperature=1.0, top_p=top_p, seed=5)
    g = make_generator(p)
    assert [sample_row(ROW, p, g) for _ in range(20)] == [1] * 20


def test_both_underflowing_through_the_engine(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=1024, max_concurrency=2)
    try:
        want = llm.generate([5, 6, 7], greedy(8)).token_ids
        for t, tp in ((1e-45, 1.0), (1.0, 1e-45), (1e-45, 1e-45), (1e-37, 1e-46)):
            got = llm.generate([5, 6, 7], greedy(8, temperature=t, top_p=tp, seed=9), timeout=60)
            assert got.token_ids == want, (t, tp)
        assert llm._fatal is None
    finally:
        llm.stop()


REQS = [([3, 40, 7, 3, 40], 9), ([8, 8, 1], 12), ([20, 21, 22, 23, 24, 25, 26], 7), ([2, 5], 10)]


def _run(llm, params_for):
    handles = [llm.submit(p, params_for(i, n)) for i, (p, n) in enumerate(REQS)]
    out = []
    for h in handles:
        try:
            out.append(h.result(60).token_ids)
        except RequestFailed as e:
            out.append(e)
    return out


def _faulty(llm, victim_index: int, where: str, at_token: int):
    """Fault injection (nothing real fails on demand): wrap the scheduler's per-request step
    so that it raises for one request once it has `at_token` tokens."""
    sched = llm.scheduler
    victim = {}
    name = {"decode": "_emit", "prefill": "_prefill_seq"}[where]
    real = getattr(sched, name)

    def broken(seq, *args):
        if seq.id == victim.get("id") and seq.num_generated >= at_token:
            raise ZeroDivisionError("injected fault")
        return real(seq, *args)
    setattr(sched, name, broken)
    return victim


@pytest.mark.parametrize("spec", ["none", "ngram"])
@pytest.mark.parametrize("where,at_token", [("decode", 3), ("prefill", 0)])
@pytest.mark.parametrize("sampled", [False, True])
def test_fault_in_one_request_fails_only_that_request(qwen3_dir, device, spec, where, at_token, sampled):
    def params_for(i, n):
        if sampled and i % 2:
            return SamplingParams(max_new_tokens=n, temperature=0.9, seed=i, ignore_eos=True)
        return greedy(n)

    kw = dict(device=device, kv_capacity_tokens=2048, max_concurrency=4, prefill_chunk=2, spec=spec)
    clean_llm = LLM(qwen3_dir, **kw)
    try:
        clean = _run(clean_llm, params_for)
    finally:
        clean_llm.stop()
    llm = LLM(qwen3_dir, **kw)
    try:
        victim = _faulty(llm, 1, where, at_token)
        with llm.paused():     # the victim's id is known before any step runs
            handles = [llm.submit(p, params_for(i, n)) for i, (p, n) in enumerate(REQS)]
            victim["id"] = handles[1].id
        got = []
        for h in handles:
            try:
                got.append(h.result(60).token_ids)
            except RequestFailed as e:
                got.append(e)
        after = llm.generate(REQS[0][0], greedy(REQS[0][1]), timeout=60).token_ids   # still serves
        assert llm.status()["blocks_used"] == 0          # the failed request's blocks came back
        assert llm._fatal is None
    finally:
        llm.stop()
    assert all(isinstance(t, list) for t in clean)
    err = got[1]
    assert isinstance(err, RequestFailed) and isinstance(err.cause, ZeroDivisionError)
    assert err.where in ({"prefill"} if where == "prefill" else {"sampling", "verify"})
    assert "injected fault" in str(err)
    assert [got[i] for i in (0, 2, 3)] == [clean[i] for i in (0, 2, 3)]
    assert after == clean[0]            # request 0 is greedy in every case


def test_failed_request_stream_raises_its_error(qwen3_dir, device):
    llm = LLM(qwen3_dir, device=device, kv_capacity_tokens=1024, max_concurrency=2)
    try:
        victim = _faulty(llm, 0, "decode", 2)
        with llm.paused():
            h = llm.submit([1, 2, 3], greedy(10))
            victim["id"] = h.id
        seen = []
        with pytest.raises(RequestFailed, match="injected fault"):
            for tok in h.stream():
                seen.append(tok)
        assert len(seen) == 2
    finally:
        llm.stop()
