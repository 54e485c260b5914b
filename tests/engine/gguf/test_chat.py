"""engine.model.chat renders the model's own template like transformers, in a sandbox, and knows end-of-turn."""
from __future__ import annotations

import json

import pytest

from engine.model.chat import (FALLBACK_TEMPLATE, ChatTemplateError, apply_chat_template, end_of_turn_ids,
                         load_chat_template, render_chat)

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And 3+3?\nExplain."}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_renders_like_transformers(model_dir, hf_gguf, messages, add_generation_prompt):
    _, tok = hf_gguf
    expected = tok.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=False)
    assert render_chat(model_dir, messages, add_generation_prompt) == expected


def test_smollm_template_adds_its_default_system_prompt(model_dir):
    text = render_chat(model_dir, CONVERSATIONS[0])
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")


def test_end_of_turn_is_im_end(model_dir):
    ids = end_of_turn_ids(model_dir)
    assert 2 in ids                      # <|im_end|>
    assert ids == {0, 2}                 # and <|endoftext|>; no other token stops a turn


def test_fallback_template_for_a_directory_without_one(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    assert load_chat_template(tmp_path) == (None, "", "</s>")
    assert render_chat(tmp_path, CONVERSATIONS[0]) == apply_chat_template(FALLBACK_TEMPLATE, CONVERSATIONS[0])
    assert render_chat(tmp_path, CONVERSATIONS[0]).endswith("<|im_start|>assistant\n")


def test_sandbox_refuses_unsafe_templates():
    with pytest.raises(ChatTemplateError, match="unsafe"):
        apply_chat_template("{{ messages.__class__.__mro__[1].__subclasses__() }}", CONVERSATIONS[0])
    with pytest.raises(ChatTemplateError, match="unsafe"):
        apply_chat_template("{% set _ = messages.append(1) %}", CONVERSATIONS[0])


def test_template_errors_are_typed():
    with pytest.raises(ChatTemplateError, match="does not parse"):
        apply_chat_template("{% for m in messages %}", CONVERSATIONS[0])
    with pytest.raises(ChatTemplateError, match="only user"):
        apply_chat_template("{{ raise_exception('only user') }}", CONVERSATIONS[0])
    with pytest.raises(ChatTemplateError, match=r"messages\[0\]"):
        apply_chat_template(None, [{"content": "no role"}])
    with pytest.raises(ChatTemplateError, match="non-empty"):
        apply_chat_template(None, [])
