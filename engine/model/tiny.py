"""Deterministic tiny random-initialised model directories (Llama or Qwen3) for tests and demos.

Same (arch, seed, dtype) => byte-identical files: fixed tensor order and metadata, sorted JSON.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, pre_tokenizers
from tokenizers.models import BPE

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# A handful of fixed merges make the byte-level BPE a real one; any text still round-trips.
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("a", "n"), ("o", "n"),
          ("r", "e"), ("Ġ", "a"), ("Ġ", "s"), ("Ġ", "w"), ("o", "r"), ("e", "n"), ("Ġ", "c"),
          ("i", "s"), ("a", "t"), ("Ġ", "o"), ("e", "s"), ("Ġ", "b"), ("in", "g")]
VOCAB_SIZE = 320
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

# out_gain scales o_proj / down_proj: with tied embeddings the input token's own logit would
# otherwise dominate and greedy decoding would just repeat it.
OUT_GAIN = {"qwen3": 6.0, "llama": 1.0}
SHAPES = {
    "qwen3": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=32, intermediate_size=128),
    "llama": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=16, intermediate_size=160),
}


def build_tokenizer() -> Tokenizer:
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    for a, b in MERGES:
        vocab.setdefault(a + b, len(vocab))
    tok = Tokenizer(BPE(vocab=vocab, merges=MERGES))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL)
    return tok


def model_config(arch: str, eos_id: int, dtype: str) -> dict:
    if arch not in SHAPES:
        raise ValueError(f"arch must be one of {sorted(SHAPES)}, got {arch!r}")
    cfg = dict(SHAPES[arch], vocab_size=VOCAB_SIZE, model_type=arch, rms_norm_eps=1e-6,
               max_position_embeddings=2048, hidden_act="silu", attention_bias=False,
               bos_token_id=None, eos_token_id=eos_id, torch_dtype=dtype)
    if arch == "qwen3":
        cfg.update(architectures=["Qwen3ForCausalLM"], rope_theta=1000000.0, tie_word_embeddings=True)
    else:
        cfg.update(architectures=["LlamaForCausalLM"], rope_theta=500000.0, tie_word_embeddings=False,
                   mlp_bias=False, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    return cfg


def random_weights(cfg: dict, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Transformers-named weights. Scales are large enough that logits are peaked, so greedy
    decoding is not decided by rounding noise."""
    g = torch.Generator().manual_seed(seed)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, kvh, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    gain = OUT_GAIN[cfg["model_type"]]

    def rnd(*shape, std):
        return (torch.randn(*shape, generator=g) * std).to(dtype)

    def norm(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g)).to(dtype)

    w = {"model.embed_tokens.weight": rnd(v, h, std=1.0), "model.norm.weight": norm(h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = rnd(nh * d, h, std=h ** -0.5)
        w[p + "self_attn.k_proj.weight"] = rnd(kvh * d, h, std=h ** -0.5)
        w[p + "self_attn.v_proj.weight"] = rnd(kvh * d, h, std=h ** -0.5)
        w[p + "self_attn.o_proj.weight"] = rnd(h, nh * d, std=gain * (nh * d) ** -0.5)
        w[p + "mlp.gate_proj.weight"] = rnd(inter, h, std=h ** -0.5)
        w[p + "mlp.up_proj.weight"] = rnd(inter, h, std=h ** -0.5)
        w[p + "mlp.down_proj.weight"] = rnd(h, inter, std=gain * inter ** -0.5)
        if cfg["model_type"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = norm(d)
            w[p + "self_attn.k_norm.weight"] = norm(d)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rnd(v, h, std=0.5)
    return {k: t.contiguous() for k, t in sorted(w.items())}


def make_tiny_model(out: str | Path, arch: str = "qwen3", seed: int = 0, dtype: str = "float32") -> Path:
    tdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(dtype)
    if tdtype is None:
        raise ValueError(f"dtype must be float32 or bfloat16, got {dtype!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    eos_id = tok.token_to_id("<|endoftext|>")
    cfg = model_config(arch, eos_id, dtype)
    save_file(random_weights(cfg, seed, tdtype), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    tok_json = json.loads(tok.to_str())
    (out / "tokenizer.json").write_text(json.dumps(tok_json, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    tconf = {"bos_token": None, "eos_token": "<|im_end|>", "chat_template": CHAT_TEMPLATE,
             "model_max_length": cfg["max_position_embeddings"], "tokenizer_class": "PreTrainedTokenizerFast",
             "clean_up_tokenization_spaces": False}
    (out / "tokenizer_config.json").write_text(json.dumps(tconf, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    return out
