"""GGUF tokenizer metadata -> tokenizer.json (the `tokenizers` library) and tokenizer_config.json."""
from __future__ import annotations

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from engine.gguf_import.errors import GGUFError, UnsupportedGGUFError

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types

_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_level(regex: bool = True) -> pre_tokenizers.ByteLevel:
    return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=regex)


def _split(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"), _byte_level(False)])


# tokenizer.ggml.pre -> how text is cut before BPE; each mirrors the pre-tokenizer llama.cpp uses
# for that name (SmolLM: single digits, then GPT-2's byte-level regex).
PRE_TOKENIZERS = {
    "smollm": lambda: pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _byte_level()]),
    "gpt2": _byte_level,
    "llama-bpe": lambda: _split(_LLAMA3_SPLIT),
    "qwen2": lambda: _split(_QWEN2_SPLIT),
}


def _list(meta: dict, key: str, path: str) -> list:
    value = meta.get(key)
    if not isinstance(value, list) or not value:
        raise GGUFError(path, f"tokenizer metadata {key!r} is missing or empty")
    return value


def build_tokenizer(meta: dict, path: str) -> Tokenizer:
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise UnsupportedGGUFError(path, "tokenizer model", [str(model)], ["gpt2"])
    pre = meta.get("tokenizer.ggml.pre", "gpt2")
    if pre not in PRE_TOKENIZERS:
        raise UnsupportedGGUFError(path, "pre-tokenizer", [str(pre)], list(PRE_TOKENIZERS))
    tokens = _list(meta, "tokenizer.ggml.tokens", path)
    merges = _list(meta, "tokenizer.ggml.merges", path)
    types = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    if len(types) != len(tokens):
        raise GGUFError(path, f"{len(types)} token types for {len(tokens)} tokens")
    vocab = {}
    for i, tok in enumerate(tokens):
        if tok in vocab:
            raise GGUFError(path, f"token {tok!r} appears twice in the vocabulary (ids {vocab[tok]} and {i})")
        vocab[tok] = i
    pairs = []
    for i, merge in enumerate(merges):
        parts = merge.split(" ")
        if len(parts) != 2 or parts[0] not in vocab or parts[1] not in vocab:
            raise GGUFError(path, f"merge {i} {merge!r} is not two tokens of the vocabulary")
        pairs.append((parts[0], parts[1]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = PRE_TOKENIZERS[pre]()
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, k in zip(tokens, types) if k == CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, k in zip(tokens, types) if k == USER_DEFINED])
    if meta.get("tokenizer.ggml.add_bos_token") and "tokenizer.ggml.bos_token_id" in meta:
        bos = tokens[int(meta["tokenizer.ggml.bos_token_id"])]
        bos_id = int(meta["tokenizer.ggml.bos_token_id"])
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
    return tok


def build_tokenizer_config(meta: dict, max_length: int) -> dict:
    tokens = meta["tokenizer.ggml.tokens"]

    def name(key: str):
        idx = meta.get(f"tokenizer.ggml.{key}")
        return tokens[int(idx)] if idx is not None and 0 <= int(idx) < len(tokens) else None

    config = {
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "bos_token": name("bos_token_id"),
        "eos_token": name("eos_token_id"),
        "pad_token": name("padding_token_id"),
        "unk_token": name("unknown_token_id"),
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    if isinstance(meta.get("tokenizer.chat_template"), str):
        config["chat_template"] = meta["tokenizer.chat_template"]
    return config
