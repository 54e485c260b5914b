"""Engine vs transformers on the same GGUF, float32: identical greedy continuations, close logits."""
from __future__ import annotations

import pytest

from engine.model.chat import render_chat
from engine.runtime.sampling import SamplingParams

from .prompts import CHAT_QUESTIONS, RAW_TEXTS, chat_messages
from .reference import engine_logits, hf_greedy_batch, hf_logits

NEW_TOKENS = 32
# Largest |logit difference| allowed over all prompt positions: the two sides sum in different
# orders (paged attention, fused projections), so they agree to float32 rounding, not bit for bit.
# Measured about 7e-5 on logits of magnitude ~20; the bound leaves room for other BLAS builds.
LOGIT_BOUND = 5e-4


@pytest.fixture(scope="session")
def prompts(model_dir, our_tokenizer):
    chat = [render_chat(model_dir, chat_messages(q)) for q in CHAT_QUESTIONS]
    return [our_tokenizer.encode(t, add_special_tokens=False).ids for t in chat + RAW_TEXTS]


@pytest.fixture(scope="session")
def hf_continuations(hf_gguf, prompts):
    model, _ = hf_gguf
    return hf_greedy_batch(model, prompts, NEW_TOKENS, pad_id=2)


@pytest.fixture(scope="session")
def our_continuations(llm, prompts):
    # ignore_eos: both sides emit exactly NEW_TOKENS argmax tokens, end-of-turn included.
    handles = [llm.submit(p, SamplingParams(max_new_tokens=NEW_TOKENS, ignore_eos=True)) for p in prompts]
    return [h.result(timeout=900).token_ids for h in handles]


def test_prompt_set_is_large_and_mixed(prompts):
    assert len(prompts) >= 20
    assert sum(p[0] == 1 for p in prompts) == len(CHAT_QUESTIONS)   # chat prompts start <|im_start|>


@pytest.mark.parametrize("index", range(len(CHAT_QUESTIONS) + len(RAW_TEXTS)))
def test_greedy_continuation_equals_transformers(index, hf_continuations, our_continuations, our_tokenizer):
    ours, ref = our_continuations[index], hf_continuations[index]
    first = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), None)
    assert ours == ref, (f"diverges at token {first}: ours {our_tokenizer.decode(ours)!r} vs "
                         f"transformers {our_tokenizer.decode(ref)!r}")
    assert len(ours) == NEW_TOKENS


@pytest.mark.parametrize("index", [0, 4, 12, 16])
def test_prompt_logits_within_bound(index, llm, hf_gguf, prompts, our_continuations):
    # our_continuations first: the engine must be idle while the test borrows its runner.
    model, _ = hf_gguf
    ids = prompts[index] + our_continuations[index][:8]
    ours, ref = engine_logits(llm, ids), hf_logits(model, ids)
    assert ours.shape == ref.shape == (len(ids), 49152)
    assert (ours - ref).abs().max().item() <= LOGIT_BOUND
    assert ours.argmax(-1).tolist() == ref.argmax(-1).tolist()
