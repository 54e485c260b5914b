"""Rotary position embeddings (half-rotation layout, as in Hugging Face Llama/Qwen3)."""
from __future__ import annotations

import math

import torch

from engine.model.config import ModelConfig


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
    """cos and sin [max_positions, head_dim] (each half repeated), float32, as transformers builds them."""
    inv = inv_frequencies(cfg)
    pos = torch.arange(max_positions, dtype=torch.float32)
    freqs = torch.outer(pos, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    # Torch computes a float tensor's cos through MKL's vector math, the OpenMP pool's threads
    # each on a share. Built as the first such call of a process, this table came out in some
    # processes with one thread's share wrong far beyond float32 rounding, while sin and every
    # later cos were right; a one-element call first, on this thread alone, removed it
    # (scripts/probe_rope_table.py; figures in docs/perf/reference-model.md). The cause inside
    # MKL is not known. The table itself is computed as before, so a right table keeps its bits.
    torch.cos(torch.zeros(1))
    return emb.cos().to(device), emb.sin().to(device)
