"""The engine against transformers on the same tiny checkpoints, in float32."""
from __future__ import annotations

import pytest
import torch
import transformers

from engine.runtime.llm import LLM
from tests.engine.helpers import PROMPTS, engine_logits, greedy


LOGIT_ATOL = 1e-4        # fp32 engine vs fp32 transformers, max abs difference
INT8_LOGIT_RTOL = 0.03   # int8 KV vs fp32 transformers: max abs diff / max |logit|
INT8_EXACT_TOKENS = 16   # int8 KV: every test prompt's first 16 greedy tokens equal transformers'
# Random-weight models have near-tied logits; over 32 tokens int8 KV noise flips one now and then
# (seen here: one prompt of six per model, past token 15). So with int8 KV every prompt must match
# token for token over the first INT8_EXACT_TOKENS, all but one over 32, and a divergence is
# allowed only where the reference's top two logits lie within the int8 error bound of each other.
# Identity is a fair demand only where the reference's own choice is not that close: on prompts
# whose reference continuation keeps its top-two margin at or above INT8_MARGIN (of the largest
# |logit|) at every one of 32 steps, chosen by the reference alone, every int8 continuation
# must be identical. Flips were seen only at margins up to 0.12% (24 random prompts per model).
INT8_MARGIN = 2.5e-3
INT8_MIN_PROMPTS = 8      # at least this many of the 24 pool prompts must qualify per model


@pytest.fixture(scope="module")
def hf_models(qwen3_dir, llama_dir, device):
    out = {}
    for d in (qwen3_dir, llama_dir):
        m = transformers.AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32).to(device).eval()
        out[str(d)] = m
    return out


def hf_greedy(model, ids: list[int], n: int) -> list[int]:
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq], device=model.device)).logits[0, -1]
            seq.append(int(torch.argmax(logits)))
    return seq[len(ids):]


@pytest.mark.parametrize("attention", ["auto", "torch"])    # the selected backend, and the PyTorch references
def test_logits_match_transformers(tiny_dir, hf_models, device, attention):
    llm = LLM(tiny_dir, device=device, kv_capacity_tokens=512, attention=attention)
    hf = hf_models[str(tiny_dir)]
    for p in PROMPTS:
        ids = llm.tokenizer.encode(p)
        ours = engine_logits(llm, ids)
        with torch.no_grad():
            ref = hf(torch.tensor([ids], device=hf.device)).logits[0].float().cpu()
        diff = (ours - ref).abs().max().item()
        assert diff < LOGIT_ATOL, f"{p!r}: max |logit diff| {diff}"
        assert ref.abs().max().item() > 1.0   # the comparison is not between two near-zero tensors


def test_greedy_continuation_matches_transformers(tiny_dir, hf_models, device):
    hf = hf_models[str(tiny_dir)]
    llm = LLM(tiny_dir, device=device, kv_capacity_tokens=1024, prefill_chunk=4)
    try:
        for p in PROMPTS:
            ids = llm.tokenizer.encode(p)
            assert llm.generate(ids, greedy(32)).token_ids == hf_greedy(hf, ids, 32), p
    finally:
        llm.stop()


def test_int8_kv_greedy_continuations(tiny_dir, hf_models, device):
    hf = hf_models[str(tiny_dir)]
    llm = LLM(tiny_dir, device=device, kv_dtype="int8", kv_capacity_tokens=1024, prefill_chunk=4)
    identical = 0
    try:
        for p in PROMPTS:
            ids = llm.tokenizer.encode(p)
            got, want = llm.generate(ids, greedy(32)).token_ids, hf_greedy(hf, ids, 32)
            assert got[:INT8_EXACT_TOKENS] == want[:INT8_EXACT_TOKENS], f"{p!r}: int8 differs early"
            if got == want:
                identical += 1
                continue
            i = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b)
            with torch.no_grad():
                ref = hf(torch.tensor([ids + want[:i]], device=hf.device)).logits[0, -1].float()
            top2 = torch.topk(ref, 2).values
            gap = (top2[0] - top2[1]).item() / ref.abs().max().item()
            assert gap < INT8_LOGIT_RTOL, f"{p!r}: diverged at {i} where the reference's margin is {gap:.4f}"
    finally:
        llm.stop()
    assert identical >= len(PROMPTS) - 1, f"only {identical}/{len(PROMPTS)} int8 continuations identical"


def test_int8_kv_identical_on_well_conditioned_prompts(tiny_dir, hf_models, device):
    hf = hf_models[str(tiny_dir)]
    llm = LLM(tiny_dir, device=device, kv_dtype="int8", kv_capacity_tokens=4096, prefill_chunk=4)
    g = torch.Generator().manual_seed(7)
    pool = [torch.randint(3, llm.config.vocab_size, (int(torch.randint(4, 40, (1,), generator=g)),),
                          generator=g).tolist() for _ in range(24)]
    chosen = []
    for ids in pool:
        with torch.no_grad():
            out = hf.generate(torch.tensor([ids], device=hf.device), max_new_tokens=32, do_sample=False,
                              output_logits=True, return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
        margin = min(((t[0] - t[1]) / z.abs().max()).item()
                     for z in (lg[0].float() for lg in out.logits) for t in [torch.topk(z, 2).values])
        if margin >= INT8_MARGIN:
            chosen.append((ids, out.sequences[0, len(ids):].tolist()))
    assert len(chosen) >= INT8_MIN_PROMPTS, f"only {len(chosen)} of 24 prompts are well-conditioned"
    try:
        handles = [(llm.submit(ids, greedy(32)), want) for ids, want in chosen]
        differ = [i for i, (h, want) in enumerate(handles) if h.result(300).token_ids != want]
    finally:
        llm.stop()
    assert differ == [], f"int8 continuations differ on {len(differ)} of {len(chosen)} prompts: {differ}"


def test_int8_kv_logits_within_bound(tiny_dir, hf_models, device):
    llm = LLM(tiny_dir, device=device, kv_dtype="int8", kv_capacity_tokens=512)
    assert llm.pool.k.dtype == torch.int8 and llm.pool.k_scale is not None
    hf = hf_models[str(tiny_dir)]
    worst = 0.0
    for p in PROMPTS:
        ids = llm.tokenizer.encode(p)
        with torch.no_grad():
            ref = hf(torch.tensor([ids], device=hf.device)).logits[0].float().cpu()
        rel = (engine_logits(llm, ids) - ref).abs().max().item() / ref.abs().max().item()
        worst = max(worst, rel)
    assert 0.0 < worst < INT8_LOGIT_RTOL, worst   # > 0: the KV really was quantised


def test_bf16_kv_runs_close(qwen3_dir, hf_models, device):
    llm = LLM(qwen3_dir, device=device, kv_dtype="bf16", kv_capacity_tokens=512)
    assert llm.pool.k.dtype == torch.bfloat16
    hf = hf_models[str(qwen3_dir)]
    ids = llm.tokenizer.encode(PROMPTS[1])
    with torch.no_grad():
        ref = hf(torch.tensor([ids], device=hf.device)).logits[0].float().cpu()
    rel = (engine_logits(llm, ids) - ref).abs().max().item() / ref.abs().max().item()
    assert 0.0 < rel < 0.01, rel


def test_bf16_compute_close_to_fp32(llama_dir, hf_models, device):
    llm = LLM(llama_dir, device=device, dtype="bfloat16", kv_capacity_tokens=512)
    assert llm.model.embed.weight.dtype == torch.bfloat16 and llm.pool.k.dtype == torch.bfloat16
    hf = hf_models[str(llama_dir)]
    ids = llm.tokenizer.encode(PROMPTS[3])
    with torch.no_grad():
        ref = hf(torch.tensor([ids], device=hf.device)).logits[0].float().cpu()
    rel = (engine_logits(llm, ids) - ref).norm().item() / ref.norm().item()
    assert rel < 0.03, rel     # bf16 weights and activations: about 2**-8 relative per value


@pytest.mark.parametrize("kv_dtype", ["auto", "int8"])
def test_torch_attention_path_matches_kernels_ops(qwen3_dir, device, kv_dtype):
    outs = []
    for attention in ("auto", "torch"):
        llm = LLM(qwen3_dir, device=device, kv_dtype=kv_dtype, kv_capacity_tokens=512, attention=attention)
        try:
            outs.append(llm.generate(llm.tokenizer.encode(PROMPTS[4]), greedy(24)).token_ids)
        finally:
            llm.stop()
    assert outs[0] == outs[1]
