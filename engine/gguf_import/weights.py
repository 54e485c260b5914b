"""GGUF tensors -> Hugging Face Llama state dict: dequantize, reshape, undo llama.cpp's Q/K permutation."""
from __future__ import annotations

import re

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from engine.gguf_import.errors import GGUFError, UnsupportedGGUFError

# Types gguf.quants dequantizes on the CPU. The reference model's tests exercise F32, Q8_0 and Q4_1;
# the others use the same gguf.quants code path but are not checked against another loader here.
SUPPORTED_TYPES = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                   "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}

_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight",
           "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
_BLOCK = {"attn_norm.weight": "input_layernorm.weight",
          "ffn_norm.weight": "post_attention_layernorm.weight",
          "attn_q.weight": "self_attn.q_proj.weight",
          "attn_k.weight": "self_attn.k_proj.weight",
          "attn_v.weight": "self_attn.v_proj.weight",
          "attn_output.weight": "self_attn.o_proj.weight",
          "ffn_gate.weight": "mlp.gate_proj.weight",
          "ffn_up.weight": "mlp.up_proj.weight",
          "ffn_down.weight": "mlp.down_proj.weight"}
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def hf_name(name: str) -> str | None:
    if name in _GLOBAL:
        return _GLOBAL[name]
    m = _BLOCK_RE.match(name)
    if m and m.group(2) in _BLOCK:
        return f"model.layers.{int(m.group(1))}.{_BLOCK[m.group(2)]}"
    return None


def expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """HF name -> [out, in] shape every Llama tensor must have under this config."""
    h, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    q, kv = config["num_attention_heads"] * config["head_dim"], config["num_key_value_heads"] * config["head_dim"]
    block = {"input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,),
             "self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h),
             "self_attn.v_proj.weight": (kv, h), "self_attn.o_proj.weight": (h, q),
             "mlp.gate_proj.weight": (f, h), "mlp.up_proj.weight": (f, h), "mlp.down_proj.weight": (h, f)}
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for i in range(config["num_hidden_layers"]):
        shapes.update({f"model.layers.{i}.{k}": s for k, s in block.items()})
    return shapes


def check_tensors(reader: GGUFReader, path: str, config: dict) -> None:
    """Refuses, listing them all, unsupported types, unplaceable names, missing or misshapen tensors."""
    bad_types = sorted({t.tensor_type.name for t in reader.tensors if t.tensor_type.name not in SUPPORTED_TYPES})
    if bad_types:
        raise UnsupportedGGUFError(path, "tensor types", bad_types, sorted(SUPPORTED_TYPES))
    unknown = [t.name for t in reader.tensors if hf_name(t.name) is None]
    if unknown:
        raise UnsupportedGGUFError(path, "tensors", unknown, sorted(_GLOBAL) + [f"blk.N.{k}" for k in _BLOCK])
    expected = expected_shapes(config)
    present = {hf_name(t.name): t for t in reader.tensors}
    missing = sorted(set(expected) - set(present) - {"lm_head.weight"})
    if missing:
        raise GGUFError(path, f"{len(missing)} tensors are missing, e.g. {', '.join(missing[:5])}")
    wrong = [f"{t.name} {list(reversed([int(d) for d in t.shape]))} (expected {list(expected[n])})"
             for n, t in present.items() if n in expected and tuple(reversed([int(d) for d in t.shape])) != expected[n]]
    if wrong:
        raise GGUFError(path, f"tensor shapes do not match the metadata: {'; '.join(wrong[:5])}")


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of llama.cpp's convert_hf_to_gguf permute(): interleaved RoPE pairs -> HF's halves."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_state_dict(reader: GGUFReader, path: str, heads: int, kv_heads: int,
                    dtype: torch.dtype) -> dict[str, torch.Tensor]:
    out = {}
    for t in reader.tensors:
        name = hf_name(t.name)
        try:
            w = dequantize(t.data, GGMLQuantizationType(t.tensor_type))
        except (ValueError, NotImplementedError) as e:
            raise GGUFError(path, f"tensor {t.name!r} cannot be dequantized: {e}") from None
        # GGUF lists dimensions fastest first; numpy's shape is the reverse, which is HF's [out, in].
        w = np.asarray(w, dtype=np.float32).reshape(tuple(int(d) for d in reversed(t.shape)))
        if t.name.endswith("attn_q.weight"):
            w = unpermute(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute(w, kv_heads)
        out[name] = torch.from_numpy(np.array(w, dtype=np.float32, order="C")).to(dtype)
    return out
