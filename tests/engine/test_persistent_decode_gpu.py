"""The persistent batch-1 decode step (engine.runtime.persistent_decode) on an sm_90 GPU: the
engine takes it for a Llama shape, it agrees with the layered step over the same cache and block
table, replayed from the captured graph step after step (short, chunk-crossing, many-split and
long contexts, blocks out of order), and an engine decoding greedily through it gives the layered
engine's tokens up to the first near-tie of random weights.

Runs only with ENGINE_TEST_DEVICE=cuda on an sm_90 GPU (random weights; nothing to download):

    ENGINE_TEST_DEVICE=cuda python -m pytest -q tests/engine/test_persistent_decode_gpu.py
"""
from __future__ import annotations

import os

import pytest
import torch

from engine.benchmarks.decode import LLAMA_8B, hf_model
from engine.benchmarks.harness import BenchLLM
from engine.errors import DecodeKernelFailed
from engine.model.config import ModelConfig
from engine.model.weights import build_model
from engine.runtime import persistent_decode as pd
from engine.runtime.sampling import SamplingParams

pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("ENGINE_TEST_DEVICE") != "cuda", reason="ENGINE_TEST_DEVICE=cuda only")]

# A small Llama with the 8B's head shape (head_dim 128, 4 q heads a kv head).
SHAPE = dict(LLAMA_8B, vocab_size=8192, hidden_size=1024, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=2, intermediate_size=2048)
MAX_LEN = 16384


@pytest.fixture(scope="module")
def model():
    dev = torch.device("cuda")
    cfg = ModelConfig.from_dict(SHAPE, where="test shape")
    return cfg, build_model(cfg, dict(hf_model(SHAPE, dev).state_dict()), torch.bfloat16, dev, MAX_LEN, "test")


def _llm(model):
    cfg, m = model
    return BenchLLM(cfg, m, kv_dtype="bf16", device=torch.device("cuda"), kv_capacity_tokens=MAX_LEN + 64,
                    max_concurrency=1, max_model_len=MAX_LEN)


@pytest.fixture(scope="module")
def llm(model):
    engine = _llm(model)
    yield engine
    engine.stop()


def test_the_engine_takes_the_persistent_step_for_batch_1(llm):
    status = llm.status()
    assert status["persistent_decode"] is True and status["persistent_decode_off"] is None


@pytest.mark.parametrize("length", [1, 64, 129, 1025, 9000])
def test_persistent_step_agrees_with_the_layered_step(llm, length):
    # Two consecutive steps, each the captured graph's replay against the layered step run eagerly
    # on the same inputs: one sequence over blocks out of order, random KV. 9000 tokens: 256-token
    # attention splits (64 x 128 is exceeded), 36 of them.
    g, pool = llm.runner.graphs, llm.pool
    gen = torch.Generator(device="cuda").manual_seed(length)
    pool.k.normal_(generator=gen)
    pool.v.normal_(generator=gen)
    n_blocks = -(-(length + 1) // pool.block_size)
    blocks = torch.randperm(pool.num_blocks, device="cuda", generator=gen)[:n_blocks].to(torch.int32)
    g.tables[0].fill_(-1)
    g.tables[0, :n_blocks] = blocks
    inp = g.inp[1]
    inp[0, 0] = 101
    for pos in (length - 1, length):
        inp[1, 0] = pos
        inp[2, 0] = int(blocks[pos // pool.block_size]) * pool.block_size + pos % pool.block_size
        layered = g._layered(1).float()             # eager, leaves inp alone
        g.graphs[1].replay()                        # writes its greedy id into inp[0] for the next step
        persistent = g.outputs[1].float()
        torch.cuda.synchronize()
        assert not g.persistent.failed()
        diff = ((persistent - layered).abs().max() / layered.abs().max()).item()
        assert diff < 2e-2, (pos, diff)
        assert int(inp[0, 0]) == int(layered.argmax()), pos


def test_greedy_tokens_through_the_graph_follow_the_layered_engines(model, llm, monkeypatch):
    # Random weights leave near-ties among the logits, which bf16 noise (split-K sums in another
    # order) may break either way: the tokens must agree up to the first step where the layered
    # engine's top two are within NEAR_TIE nats, and up to there every step is checked.
    near_tie = 0.05
    prompt = torch.randint(0, SHAPE["vocab_size"], (300,), generator=torch.Generator().manual_seed(3)).tolist()
    params = SamplingParams(max_new_tokens=48, ignore_eos=True, logprobs=2)
    with_it = llm.generate(prompt, params).token_ids
    monkeypatch.setenv(pd.ENV, "0")
    layered = _llm(model)
    try:
        assert layered.status()["persistent_decode_off"] == f"{pd.ENV}=0"
        ref = layered.generate(prompt, params)
    finally:
        layered.stop()
    gaps = [lp.top[0][1] - lp.top[1][1] for lp in ref.logprobs]
    first_tie = next((n for n, g in enumerate(gaps) if g < near_tie), len(gaps))
    agree = next((n for n, (a, b) in enumerate(zip(with_it, ref.token_ids)) if a != b), len(gaps))
    print(f"tokens agree for {agree} of {len(gaps)} steps; first near-tie at step {first_tie}")
    assert agree >= first_tie, (agree, first_tie, gaps[:agree + 1])


def test_a_barrier_time_out_fails_the_request_and_stays_set(model):
    # A time-out cannot be provoked reliably on an idle GPU, so the kernel's own flag (sync[1], which
    # a timed-out barrier sets) is set by hand: every later step, greedy through the pipelined
    # token reads or sampled through the logits, must fail with DecodeKernelFailed, and the next
    # launch must not clear it.
    engine = _llm(model)
    try:
        prompt = list(range(5, 40))
        assert len(engine.generate(prompt, SamplingParams(max_new_tokens=4, ignore_eos=True)).token_ids) == 4
        g = engine.runner.graphs
        assert int(g.failed_flag().item()) == 0
        g.persistent.sync[1] = 1
        for params in (SamplingParams(max_new_tokens=4, ignore_eos=True),
                       SamplingParams(max_new_tokens=4, ignore_eos=True, logprobs=2)):
            with pytest.raises(DecodeKernelFailed, match="ENGINE_PERSISTENT_DECODE=0"):
                engine.generate(prompt, params)
        assert int(g.failed_flag().item()) == 1
    finally:
        engine.stop()
