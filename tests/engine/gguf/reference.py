"""Reference runs for the parity tests: transformers' greedy loop and the engine's prompt logits."""
from __future__ import annotations

import torch


@torch.no_grad()
def hf_greedy(model, prompt_ids: list[int], n: int) -> list[int]:
    """Plain argmax with transformers' KV cache, never stopping early, so both sides emit n tokens."""
    out = model(torch.tensor([prompt_ids]), use_cache=True)
    past, tokens = out.past_key_values, []
    nxt = int(out.logits[0, -1].argmax())
    for _ in range(n):
        tokens.append(nxt)
        if len(tokens) == n:
            break
        out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
    return tokens


@torch.no_grad()
def hf_logits(model, prompt_ids: list[int]) -> torch.Tensor:
    return model(torch.tensor([prompt_ids])).logits[0].float()


def engine_logits(llm, prompt_ids: list[int]) -> torch.Tensor:
    """Logits for every prompt position from the engine's own prefill path over its paged pool.

    Uses the engine's runner directly (no public API returns prompt logits); only call it while
    the engine has no requests in flight.
    """
    from engine.sampling import SamplingParams
    from engine.sequence import Sequence
    seq = Sequence(list(prompt_ids), SamplingParams(max_new_tokens=1), None, llm.draft_tokens)
    blocks = llm.blocks.allocate(llm.blocks.blocks_needed(len(prompt_ids)))
    assert blocks is not None, "engine pool has no room for the logits prompt"
    seq.blocks = blocks
    try:
        return llm.runner.run_window(seq, list(prompt_ids), all_logits=True).float()
    finally:
        llm.blocks.free(blocks)
