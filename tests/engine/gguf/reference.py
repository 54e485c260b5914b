"""Reference runs for the parity tests: transformers' greedy loop and the engine's prompt logits."""
from __future__ import annotations

import torch


@torch.no_grad()
def hf_greedy_batch(model, prompts: list[list[int]], n: int, pad_id: int) -> list[list[int]]:
    """Plain argmax over a left-padded batch with transformers' KV cache, never stopping early.

    One batch instead of one loop per prompt: on two shared cores that is minutes faster.
    """
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    tokens = []
    for step in range(n):
        nxt = out.logits[:, -1].argmax(-1)
        tokens.append(nxt)
        if step == n - 1:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos,
                    cache=out.cache, use_cache=True)
    return torch.stack(tokens, dim=1).tolist()


@torch.no_grad()
def hf_logits(model, prompt_ids: list[int]) -> torch.Tensor:
    return model(torch.tensor([prompt_ids])).logits[0].float()


def engine_logits(llm, prompt_ids: list[int]) -> torch.Tensor:
    """Logits for every prompt position from the engine's own prefill path over its paged pool.

    Uses the engine's runner directly (no public API returns prompt logits); only call it while
    the engine has no requests in flight.
    """
    from engine.runtime.sampling import SamplingParams
    from engine.runtime.sequence import Sequence
    seq = Sequence(list(prompt_ids), SamplingParams(max_new_tokens=1), None, llm.draft_tokens)
    blocks = llm.blocks.allocate(llm.blocks.blocks_needed(len(prompt_ids)))
    assert blocks is not None, "engine pool has no room for the logits prompt"
    seq.blocks = blocks
    try:
        return llm.runner.run_window(seq, list(prompt_ids), all_logits=True).float()
    finally:
        llm.blocks.free(blocks)
