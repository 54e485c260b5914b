"""L2 prefetch of decode's weights on a side stream (see engine.kernels.triton_prefetch).

A batch-1 decode step is the weights' bytes over the memory bandwidth plus the time memory
sits idle: during RoPE and the KV write, attention, the norms and SwiGLU's gate, which read
little. While those run on the main stream, a side stream reads the next projection's weight
into L2: all of the o projection (behind attention, the longest idle stretch), and the first
`head_bytes` of the others. The side stream starts each read only after the projection before
it has been queued, so a read never competes with the projection it follows, and joins the
main stream at the end of the step. Captured into the decode CUDA graphs like any other work.
"""
from __future__ import annotations

import torch

# Bytes of gate_up, down, the next qkv and lm_head read ahead: about what memory moves during
# one norm or gate kernel (a few microseconds at ~4 TB/s). Measured in docs/perf/engine.md.
DEFAULT_HEAD_MB = 8.0


class WeightPrefetch:
    def __init__(self, prefetch_fn, device: torch.device, head_mb: float = DEFAULT_HEAD_MB):
        if head_mb < 0:
            raise ValueError(f"prefetch head_mb must be >= 0, got {head_mb!r}")
        self.fn = prefetch_fn
        self.side = torch.cuda.Stream(device)
        self.head_bytes = int(head_mb * 1e6)
        self._forked = False

    def _read(self, w: torch.Tensor, nbytes: int | None) -> None:
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.fn(w, nbytes)
        self._forked = True

    def whole(self, w: torch.Tensor) -> None:
        self._read(w, None)

    def head(self, w: torch.Tensor) -> None:
        if self.head_bytes:
            self._read(w, self.head_bytes)

    def join(self) -> None:
        if self._forked:
            torch.cuda.current_stream().wait_stream(self.side)
            self._forked = False


__all__ = ["DEFAULT_HEAD_MB", "WeightPrefetch"]
