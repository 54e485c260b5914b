"""What the benchmarks need around the engine and nothing else needs: an LLM over a model built
in memory (random weights of a named config, no model directory), and the GPU's copy rate."""
from __future__ import annotations

import time

import torch

from engine.runtime.llm import LLM


class BenchLLM(LLM):
    """An LLM over an already built (ModelConfig, Transformer); it has no tokenizer."""

    def __init__(self, config, model, **kwargs):
        self._prebuilt = (config, model)
        super().__init__(None, **kwargs)

    def _load(self, model_dir, dtype, max_model_len):
        config, model = self._prebuilt
        return config, model, None


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device, gib: float = 2.0, reps: int = 20) -> float:
    """Device-to-device copy, bytes read + written per second (median of reps)."""
    n = int(gib * (1 << 30)) // 2
    src = torch.randn(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    times = []
    for _ in range(reps + 3):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        times.append(time.perf_counter() - t0)
    t = sorted(times[3:])[reps // 2]
    del src, dst
    return 2 * n * 2 / t
