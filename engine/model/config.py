"""Model configuration read from a Hugging Face config.json (Llama and Qwen3 families)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ModelLoadError

SUPPORTED = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}


@dataclass(frozen=True)
class ModelConfig:
    arch: str                      # "llama" | "qwen3"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    torch_dtype: str = "float32"
    eos_token_ids: tuple[int, ...] = field(default_factory=tuple)
    bos_token_id: int | None = None

    @classmethod
    def from_dict(cls, d: dict, where: str = "config.json") -> "ModelConfig":
        arch = d.get("model_type")
        if arch not in SUPPORTED:
            raise ModelLoadError(where, f"model_type {arch!r} is not supported; expected one of {sorted(SUPPORTED)}")
        try:
            hidden, heads = int(d["hidden_size"]), int(d["num_attention_heads"])
            rope = d.get("rope_parameters") or {}
            scaling = d.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
            if scaling is not None:
                scaling = {k: v for k, v in scaling.items() if k != "rope_theta"}
                kind = scaling.get("rope_type", scaling.get("type"))
                if kind not in ("llama3", "default"):
                    raise ModelLoadError(where, f"rope_scaling type {kind!r} is not supported (llama3 or default)")
                if kind == "default":
                    scaling = None
            eos = d.get("eos_token_id")
            eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
            return cls(
                arch=arch, vocab_size=int(d["vocab_size"]), hidden_size=hidden,
                num_layers=int(d["num_hidden_layers"]), num_heads=heads,
                num_kv_heads=int(d.get("num_key_value_heads") or heads),
                head_dim=int(d.get("head_dim") or hidden // heads),
                intermediate_size=int(d["intermediate_size"]),
                rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                rope_theta=float(d.get("rope_theta", rope.get("rope_theta", 10000.0))),
                rope_scaling=scaling,
                max_position_embeddings=int(d.get("max_position_embeddings", 4096)),
                tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
                attention_bias=bool(d.get("attention_bias", False)),
                qk_norm=arch == "qwen3",
                torch_dtype=str(d.get("torch_dtype") or d.get("dtype") or "float32"),
                eos_token_ids=eos_ids, bos_token_id=d.get("bos_token_id"))
        except KeyError as e:
            raise ModelLoadError(where, f"required key {e.args[0]!r} is missing") from None
        except (TypeError, ValueError) as e:
            raise ModelLoadError(where, f"bad value: {e}") from None

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "ModelConfig":
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise ModelLoadError(str(path), "no config.json in the model directory")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ModelLoadError(str(path), f"not valid JSON: {e}") from None
        return cls.from_dict(data, where=str(path))

    def kv_bytes_per_token(self, elem_bytes: int, scale_bytes: int = 0) -> int:
        """Bytes of K and V (and their scales) that one token occupies across all layers."""
        per_layer = 2 * self.num_kv_heads * (self.head_dim * elem_bytes + scale_bytes)
        return per_layer * self.num_layers

    def prefill_pass_bytes(self, rows: int, context: int, elem_bytes: int, kv_elem_bytes: int) -> int:
        """An upper bound of the activation bytes that one prefill pass of `rows` tokens, at up to
        `context` positions, holds at once: what the memory kept free beside the weights and the
        KV pool must cover (engine.server.admission). Every tensor of one layer is counted as live
        together, though the layer frees some before it makes others; layers do not add up.

        Per row, in the compute dtype: the residual, the normed input, the attention's output and
        its projection (4 x hidden), q, k and v, q again and the attention's output before its
        projection, the gate and up products and SwiGLU's output. Over the context: K and V
        gathered from the pool, dequantised to float32 when the pool is int8, and repeated for
        every q head in the compute dtype (CUDA's fused attention takes no grouped heads). The
        last row's float32 logits."""
        h, d, hq, hkv = self.hidden_size, self.head_dim, self.num_heads, self.num_kv_heads
        per_row = 4 * h + (hq + 2 * hkv) * d + 2 * hq * d + 3 * self.intermediate_size
        gathered = 2 * context * hkv * d * (kv_elem_bytes + (4 if kv_elem_bytes == 1 else 0))
        repeated = 2 * context * hq * d * elem_bytes
        return rows * per_row * elem_bytes + gathered + repeated + self.vocab_size * (4 + elem_bytes)
