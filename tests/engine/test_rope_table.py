"""engine.model.rope's tables: cos and sin of transformers' float32 angles, each within float32
rounding of the exact values. A wrong table is what scripts/probe_rope_table.py counts across
fresh processes (MKL's vector math gave one thread's share 1.5e-4 off in some of them)."""
from __future__ import annotations

import torch

from engine.model.config import ModelConfig
from engine.model.rope import cos_sin_table, inv_frequencies
from engine.runtime.cpu_threads import on_fresh_thread


def test_tables_are_within_float32_rounding(llama_dir):
    cfg = ModelConfig.from_dir(llama_dir)
    # Built on a thread of its own, as the engine loads a model on the CPU; rows enough that
    # the pool's threads each compute a share.
    cos, sin = on_fresh_thread(cos_sin_table, cfg, 4096, "cpu")
    angles = torch.outer(torch.arange(4096, dtype=torch.float32), inv_frequencies(cfg)).repeat(1, 2).double()
    assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (4096, cfg.head_dim)
    assert float((cos.double() - angles.cos()).abs().max()) < 1e-6
    assert float((sin.double() - angles.sin()).abs().max()) < 1e-6
