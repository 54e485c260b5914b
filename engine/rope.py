"""Rotary position embeddings (half-rotation layout, as in Hugging Face Llama/Qwen3)."""
from __future__ import annotations

import math

import torch

from engine.config import ModelConfig


def inv_frequencies(cfg: ModelConfig) -> torch.Tensor:
    """Per-pair inverse frequencies in float32 (as transformers), llama3-scaled if configured."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    s = cfg.rope_scaling
    if not s:
        return inv
    factor, lo, hi = float(s["factor"]), float(s.get("low_freq_factor", 1.0)), float(s.get("high_freq_factor", 4.0))
    old_len = float(s["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old_len / lo, old_len / hi
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def cos_sin_table(cfg: ModelConfig, max_positions: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape [max_positions, head_dim // 2], float32."""
    # float32 like transformers, so that positions round the same way as the reference.
    inv = inv_frequencies(cfg)
    pos = torch.arange(max_positions, dtype=torch.float32)
    freqs = torch.outer(pos, inv)
    return freqs.cos().to(device), freqs.sin().to(device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [N, heads, head_dim]; cos/sin [N, head_dim // 2] already gathered by position."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)
