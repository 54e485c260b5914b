"""GGUF metadata -> Hugging Face config.json and generation_config.json for Llama."""
from __future__ import annotations

from gguf import GGUFReader

from engine.gguf_import.errors import GGUFError, UnsupportedGGUFError

ARCHITECTURES = {"llama": ("llama", "LlamaForCausalLM")}


def read_fields(reader: GGUFReader, path: str) -> dict:
    """All metadata as plain Python values (strings, numbers, lists)."""
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            out[key] = field.contents()
        except (ValueError, IndexError, UnicodeDecodeError) as e:
            raise GGUFError(path, f"metadata {key!r} cannot be decoded: {e}") from None
    return out


def _need(meta: dict, key: str, path: str, kind=int):
    if key not in meta:
        raise GGUFError(path, f"required metadata {key!r} is missing")
    value = meta[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GGUFError(path, f"metadata {key!r} should be a number, found {type(value).__name__}")
    return kind(value)


def architecture(meta: dict, path: str) -> str:
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise GGUFError(path, "required metadata 'general.architecture' is missing")
    if arch not in ARCHITECTURES:
        raise UnsupportedGGUFError(path, "architecture", [arch], list(ARCHITECTURES))
    return arch


def build_config(meta: dict, path: str, dtype: str, tied: bool) -> dict:
    """config.json for LlamaForCausalLM; every number comes from the file, none is guessed."""
    arch = architecture(meta, path)
    model_type, class_name = ARCHITECTURES[arch]
    p = f"{arch}."
    hidden = _need(meta, p + "embedding_length", path)
    heads = _need(meta, p + "attention.head_count", path)
    kv_heads = _need(meta, p + "attention.head_count_kv", path) if p + "attention.head_count_kv" in meta else heads
    head_dim = int(meta.get(p + "attention.key_length", meta.get(p + "rope.dimension_count", hidden // heads)))
    if head_dim * heads != hidden and p + "attention.key_length" not in meta:
        raise GGUFError(path, f"head dimension is ambiguous: hidden {hidden} / {heads} heads != {head_dim}")
    if heads % kv_heads:
        raise GGUFError(path, f"{heads} attention heads are not a multiple of {kv_heads} KV heads")
    vocab = len(meta.get("tokenizer.ggml.tokens") or []) or _need(meta, p + "vocab_size", path)
    theta = float(meta.get(p + "rope.freq_base", 10000.0))
    if meta.get(p + "rope.scaling.type", "none") not in ("none",):
        raise UnsupportedGGUFError(path, "rope scaling", [str(meta[p + "rope.scaling.type"])], ["none"])
    config = {
        "architectures": [class_name],
        "model_type": model_type,
        "hidden_size": hidden,
        "intermediate_size": _need(meta, p + "feed_forward_length", path),
        "num_hidden_layers": _need(meta, p + "block_count", path),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": _need(meta, p + "attention.layer_norm_rms_epsilon", path, float),
        "rope_theta": theta,
        "rope_parameters": {"rope_theta": theta, "rope_type": "default"},
        "max_position_embeddings": _need(meta, p + "context_length", path),
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": dtype,
    }
    config.update(special_ids(meta))
    return config


def special_ids(meta: dict) -> dict:
    keys = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id", "pad_token_id": "padding_token_id"}
    return {k: int(meta[f"tokenizer.ggml.{g}"]) for k, g in keys.items() if f"tokenizer.ggml.{g}" in meta}


def build_generation_config(meta: dict) -> dict:
    return {"_from_model_config": True, **special_ids(meta)}
