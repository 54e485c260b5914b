"""Sampling parameters and token selection: greedy argmax, or seeded temperature / top-p.

Each request owns a CPU torch.Generator seeded from its seed, and its logits row is sampled
on the CPU in float32, so a request's tokens never depend on what else is in the batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class SamplingParams:
    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False        # benchmarks: generate exactly max_new_tokens

    def __post_init__(self):
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens must be an int >= 1, got {self.max_new_tokens!r}")
        if not self.temperature >= 0.0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature!r}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def make_generator(params: SamplingParams) -> torch.Generator | None:
    if params.greedy:
        return None
    g = torch.Generator(device="cpu")
    g.manual_seed(params.seed if params.seed is not None else int(torch.randint(0, 2**62, ()).item()))
    return g


def sample_row(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator | None) -> int:
    """One token id from a [V] logits row."""
    if params.greedy:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits.detach().float().cpu() / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < params.top_p   # always keeps the top token
        sorted_p = torch.where(keep, sorted_p, torch.zeros_like(sorted_p))
        return int(order[torch.multinomial(sorted_p, 1, generator=gen)].item())
    return int(torch.multinomial(probs, 1, generator=gen).item())


def sample_rows(logits: torch.Tensor, params: list[SamplingParams], gens: list) -> list[int]:
    """One token per row of logits [B, V]; greedy rows share one argmax and one transfer."""
    greedy = torch.argmax(logits, dim=-1).tolist()
    return [greedy[i] if p.greedy else sample_row(logits[i], p, g)
            for i, (p, g) in enumerate(zip(params, gens))]


def _argmax_chunks(vocab: int) -> int:
    """The most chunks (at most 1024, each at least 128 wide) that divide vocab evenly; 1 if none."""
    for c in range(min(1024, vocab // 128), 31, -1):
        if vocab % c == 0:
            return c
    return 1


def argmax_rows(logits: torch.Tensor, chunks: int | None = None) -> torch.Tensor:
    """torch.argmax(logits, dim=-1) for [B, V] logits, in two stages on CUDA.

    A single row's argmax over a 128K vocabulary is one long reduction that a GPU runs on
    one block, slow next to a decode step (figures in docs/perf/engine.md). Here each of up to 1024 equal chunks
    finds its max and first index of it, then the first chunk holding the row's max wins:
    the first index of the row's max, as torch.argmax returns (NaN counts as the max in both).
    chunks (tests) forces a chunk count that divides V; by default the CPU takes one stage."""
    b, v = logits.shape
    c = chunks if chunks is not None else _argmax_chunks(v) if logits.is_cuda else 1
    if c == 1:
        return torch.argmax(logits, dim=-1)
    vals, idx = logits.reshape(b, c, v // c).max(dim=-1)
    best = torch.argmax(vals, dim=-1, keepdim=True)
    return (best * (v // c) + idx.gather(1, best)).squeeze(1)
