"""Our tokenizer.json encodes like transformers' GGUF tokenizer, and like the model was trained."""
from __future__ import annotations

import pytest

from .prompts import CHAT_QUESTIONS, RAW_TEXTS

TEXTS = CHAT_QUESTIONS + RAW_TEXTS + [
    "Hello world 2024 and 12345!", " 123", "  multiple   spaces\n\n\ttabs and\r\nCRLF",
    "Ünïcödé café, naïve — “quotes” 日本語 한국어 emojis 🎉🎉", "don't you'll I'M we've",
    "x=3.14159; y = x**2  # comment\n\tif y > 10:\n\t\treturn", "<|im_start|>user\nhi<|im_end|>\n",
    "KEY=048213", "a" * 300, "", " ", "\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_encodes_like_transformers_gguf_tokenizer(our_tokenizer, hf_gguf, text):
    _, ref = hf_gguf
    ours = our_tokenizer.encode(text, add_special_tokens=False).ids
    assert ours == ref.encode(text, add_special_tokens=False)
    assert our_tokenizer.decode(ours, skip_special_tokens=False) == text


def test_special_tokens_are_single_ids(our_tokenizer):
    enc = our_tokenizer.encode("<|im_start|>assistant\nParis<|im_end|><|endoftext|>", add_special_tokens=False)
    assert enc.ids[0] == 1 and enc.ids[-2:] == [2, 0]
    assert our_tokenizer.get_vocab_size(with_added_tokens=True) == 49152


def test_digits_are_split_one_by_one(our_tokenizer):
    # SmolLM's pre-tokenizer splits every digit; a six-digit code must be six tokens.
    enc = our_tokenizer.encode(" 048213", add_special_tokens=False)
    assert [our_tokenizer.decode([i]) for i in enc.ids] == [" ", "0", "4", "8", "2", "1", "3"]
