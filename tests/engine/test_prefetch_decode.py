"""The decode L2 prefetch (engine.prefetch) moves bytes earlier and nothing else: the same
tokens and logits with it on or off. It exists on CUDA only."""
from __future__ import annotations

import torch

from engine.llm import LLM
from engine.sampling import SamplingParams


def _run(model_dir, device, prefetch_mb, prompts):
    llm = LLM(model_dir, device=device, kv_capacity_tokens=2048, max_concurrency=4, l2_prefetch_mb=prefetch_mb)
    assert (llm.model.prefetch is not None) == (prefetch_mb is not None and device == "cuda")
    assert llm.status()["l2_prefetch_mb"] == (prefetch_mb if llm.model.prefetch else None)
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    with llm:
        handles = [llm.submit(p, params) for p in prompts]     # batched decode, then batch 1 tails
        return [h.result(120).token_ids for h in handles]


def test_same_tokens_with_and_without_prefetch(tiny_dir, device):
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, 300, (n,), generator=g).tolist() for n in (5, 17, 40)]
    off = _run(tiny_dir, device, None, prompts)
    on = _run(tiny_dir, device, 4.0, prompts)
    assert on == off
    assert all(len(t) == 24 for t in on)
