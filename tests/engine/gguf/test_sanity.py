"""The reference model means something: it knows Paris, finds a planted code, and stops at end of turn."""
from __future__ import annotations

import re

from engine.model.chat import end_of_turn_ids, render_chat
from engine.runtime.sampling import SamplingParams

from .needle import CODES, POSITIONS, needle_messages

IM_END = 2
# Measured 9 of 9 (docs/MODEL.md); one miss is tolerated so a BLAS change is not a false alarm,
# two would mean the model or the engine lost long-context recall.
NEEDLE_MIN_HITS = 8


def test_capital_of_france_is_paris_and_turn_ends(llm, model_dir):
    ids = llm.tokenizer.encode(render_chat(model_dir, [{"role": "user", "content": "What is the capital of France?"}]))
    result = llm.generate(ids, SamplingParams(max_new_tokens=48), timeout=900)
    text = llm.tokenizer.decode(result.token_ids)
    assert "Paris" in text
    assert result.finish_reason == "stop" and result.token_ids[-1] == IM_END
    assert IM_END in end_of_turn_ids(model_dir)
    assert result.token_ids.count(IM_END) == 1        # nothing generated past the end of the turn


def test_planted_key_is_retrieved_from_a_long_prompt(llm, model_dir):
    cases, handles = [], []
    for code in CODES:
        for position in POSITIONS:
            ids = llm.tokenizer.encode(render_chat(model_dir, needle_messages(code, position)))
            assert 900 <= len(ids) <= 1100, len(ids)
            cases.append((code, position))
            handles.append(llm.submit(ids, SamplingParams(max_new_tokens=16)))
    answers = [llm.tokenizer.decode(h.result(timeout=900).token_ids) for h in handles]
    hits = [code in re.findall(r"\d{6}", text) for (code, _), text in zip(cases, answers)]
    misses = [(c, p, a) for (c, p), a, h in zip(cases, answers, hits) if not h]
    assert sum(hits) >= NEEDLE_MIN_HITS, f"{sum(hits)}/{len(hits)} found; misses: {misses}"
    # A control: the model does not just repeat some six digits from anywhere.
    assert all(set(re.findall(r"\d{6}", a)) <= {c} for (c, _), a in zip(cases, answers))
