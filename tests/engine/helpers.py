"""Small helpers shared by the engine tests."""
from __future__ import annotations

import torch

from engine.runtime.sampling import SamplingParams
from engine.runtime.sequence import Sequence


def engine_logits(llm, ids: list[int]) -> torch.Tensor:
    """Logits [len(ids), V] of one prompt through the engine's paged prefill path."""
    seq = Sequence(ids, SamplingParams(max_new_tokens=1), None, 1)
    seq.blocks = llm.blocks.allocate(llm.blocks.blocks_needed(len(ids)))
    try:
        with llm.paused():
            return llm.runner.run_window(seq, ids, all_logits=True).cpu()
    finally:
        llm.blocks.free(seq.blocks)


def greedy(n: int, **kw) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, ignore_eos=True, **kw)


PROMPTS = ["Hello the world", "in the beginning was the word", "abc abc abc abc",
           "The quick brown fox jumps", "one two three four five six", "x"]
