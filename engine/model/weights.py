"""Hugging Face safetensors checkpoints -> the engine's fused Transformer."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from engine.errors import ModelLoadError
from engine.model.config import ModelConfig
from engine.model.layout import CPU_ROW_MAJOR, keep_row_major_copies, multi_row_copies_pay, set_projection_layout
from engine.model.transformer import Transformer


def checkpoint_files(model_dir: Path) -> list[Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        return [model_dir / n for n in names]
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(str(model_dir), "no *.safetensors file in the model directory")
    return files


def read_hf_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path in checkpoint_files(model_dir):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                out[name] = f.get_tensor(name)
    return out


def to_engine_names(cfg: ModelConfig, hf: dict[str, torch.Tensor],
                    where: str = "checkpoint") -> dict[str, torch.Tensor]:
    """Rename (and fuse q/k/v and gate/up) a transformers-style state dict."""
    def take(name: str) -> torch.Tensor:
        try:
            return hf[name]
        except KeyError:
            raise ModelLoadError(where, f"tensor {name!r} is missing") from None

    sd = {"embed.weight": take("model.embed_tokens.weight"), "norm.weight": take("model.norm.weight")}
    if cfg.tie_word_embeddings or "lm_head.weight" not in hf:
        sd["lm_head.weight"] = sd["embed.weight"]
    else:
        sd["lm_head.weight"] = hf["lm_head.weight"]
    for i in range(cfg.num_layers):
        p, a = f"model.layers.{i}.", f"layers.{i}."
        sd[a + "attn.qkv.weight"] = torch.cat([take(p + f"self_attn.{x}_proj.weight") for x in "qkv"])
        if cfg.attention_bias:
            sd[a + "attn.qkv.bias"] = torch.cat([take(p + f"self_attn.{x}_proj.bias") for x in "qkv"])
        sd[a + "attn.o.weight"] = take(p + "self_attn.o_proj.weight")
        if cfg.qk_norm:
            sd[a + "attn.q_norm.weight"] = take(p + "self_attn.q_norm.weight")
            sd[a + "attn.k_norm.weight"] = take(p + "self_attn.k_norm.weight")
        sd[a + "mlp.gate_up.weight"] = torch.cat([take(p + "mlp.gate_proj.weight"), take(p + "mlp.up_proj.weight")])
        sd[a + "mlp.down.weight"] = take(p + "mlp.down_proj.weight")
        sd[a + "attn_norm.weight"] = take(p + "input_layernorm.weight")
        sd[a + "mlp_norm.weight"] = take(p + "post_attention_layernorm.weight")
    return sd


def build_model(cfg: ModelConfig, hf: dict[str, torch.Tensor], dtype: torch.dtype, device: torch.device,
                max_positions: int | None = None, where: str = "checkpoint") -> Transformer:
    """A Transformer on device in dtype whose weights come from a transformers-named dict."""
    with torch.device("meta"):
        model = Transformer(cfg, max_positions)
    sd = to_engine_names(cfg, hf, where)
    expected = dict(model.state_dict())
    for name, t in sd.items():
        if name in expected and tuple(expected[name].shape) != tuple(t.shape):
            raise ModelLoadError(where, f"{name}: shape {tuple(t.shape)}, expected {tuple(expected[name].shape)}")
    tied = cfg.tie_word_embeddings or sd["lm_head.weight"] is sd["embed.weight"]
    sd = {k: v.to(device=device, dtype=dtype) for k, v in sd.items() if not (tied and k == "lm_head.weight")}
    missing, unexpected = model.load_state_dict(sd, strict=False, assign=True)
    missing = [m for m in missing if not (tied and m == "lm_head.weight")]
    if missing or unexpected:
        raise ModelLoadError(where, f"missing {missing}, unexpected {unexpected}")
    if tied:
        model.lm_head.weight = model.embed.weight
    if torch.device(device).type == "cuda":
        set_projection_layout(model, column_major=True)
    else:
        # The down projection (a long reduction: hidden <- intermediate) is the exception: its
        # one-row product runs faster over the row-major weight (docs/perf/reference-model.md).
        # Products of a few rows read a row-major weight where that pays (engine.model.projection).
        set_projection_layout(model, column_major=True, tied=True, row_major=CPU_ROW_MAJOR)
        if multi_row_copies_pay():
            keep_row_major_copies(model)
    model.setup_rope(device)
    return model.eval()


def load_model(model_dir: str | Path, dtype: torch.dtype, device: torch.device,
               max_positions: int | None = None) -> tuple[ModelConfig, Transformer]:
    model_dir = Path(model_dir)
    cfg = ModelConfig.from_dir(model_dir)
    return cfg, build_model(cfg, read_hf_tensors(model_dir), dtype, device, max_positions, str(model_dir))
