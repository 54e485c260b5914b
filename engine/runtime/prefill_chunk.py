"""How many prompt tokens a prefill step takes when the caller or the profile names none.

Without torch, so that the server's admission can work out the chunk it must keep memory for."""
from __future__ import annotations

# On CUDA. An eager prefill pass is bound by the host's time to issue it (some 37 ms for an
# 8B-class model's 32 layers on an H200) up to about this many tokens, so smaller chunks only
# multiply that time: a 1,040-token prompt took 197 ms to its first token in 256-token chunks
# and 40 ms in one pass (docs/perf/engine.md). A longer prompt still shares the GPU with the
# decoding sequences, one chunk a step.
CUDA_PREFILL_CHUNK = 2048


def default_prefill_chunk(device_type: str, max_model_len: int) -> int:
    """On CUDA, CUDA_PREFILL_CHUNK (at most the context). On the CPU, the whole prompt in one
    pass: the fused causal attention kernel then skips the masked half of the scores, which it
    cannot do for a chunk over a cached prefix (that takes a mask), and a pass is fewer, larger
    ops (docs/perf/reference-model.md)."""
    return min(CUDA_PREFILL_CHUNK, max_model_len) if device_type == "cuda" else max_model_len
