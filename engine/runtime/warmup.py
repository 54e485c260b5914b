"""Prefill shapes served once at start, before the first request, on CUDA.

A fresh CUDA process pays for its first prefill passes: Dynamo compiles the elementwise ops for
several rows (seconds without its on-disk cache), and a pass of a row count the process has not
run takes longer the first time. Serving a few shapes at start moves most of that before the
first request (`python3 scripts/probe_first_shapes.py`; figures in docs/perf/engine.md).

The passes run on the scheduling thread, before its first request (engine.runtime.llm starts
that thread for them), because torch keeps part of what a first pass sets up per thread: cuBLAS
handles, and SDPA's cuDNN attention plans, cached per thread and shape. Warmed on the
constructing thread, a chunk from position 0 still paid tens of milliseconds once per new length
on the scheduler's (docs/perf/engine.md); the prefill attention now also keeps cuDNN attention
out of every chunk (kernels.reference). A scheduling thread started again after LLM.stop() is
not warmed.

The passes write K/V into blocks taken from the empty pool and given back, and the pool's free
list is then reset to its order at start; a later sequence reads only positions it has written
itself, so its output does not change (tests/engine/test_warmup.py)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from engine.runtime.block_manager import BlockManager
from engine.runtime.model_runner import ModelRunner

# Rows of the extra passes: a short prompt, and a chunk of an odd length over a cached prefix
# (the lower-right causal attention, and row counts no power of two).
SHORT_ROWS = 64
TAIL_ROWS = 17


@dataclass
class _Scratch:
    """What ModelRunner.run_window reads of a sequence: its blocks and its cached length."""
    blocks: list[int]
    kv_len: int = 0


@dataclass
class WarmupReport:
    passes: list[tuple[int, int]] = field(default_factory=list)     # (start position, rows) of each
    seconds: float = 0.0
    thread: str = ""                                                 # the thread that ran them


def plan(chunk: int, max_model_len: int, capacity_tokens: int) -> list[tuple[int, int]]:
    """(start, rows) of the passes: a whole chunk from position 0, a short prompt, and a short odd
    chunk after a prefix; each within the context and the pool, the duplicates dropped."""
    room = min(max_model_len, capacity_tokens)
    full = min(chunk, room)
    passes = [(0, full), (0, min(SHORT_ROWS, full))]
    if full + TAIL_ROWS <= room:
        passes.append((full, TAIL_ROWS))
    return list(dict.fromkeys(p for p in passes if p[1] > 0))


def warm_prefill(runner: ModelRunner, blocks: BlockManager, chunk: int, max_model_len: int,
                 vocab_size: int) -> WarmupReport:
    """Run plan()'s passes through the runner's prefill path on a scratch sequence; call before the
    scheduler runs anything (the pool must be untouched: its free list is reset after)."""
    if blocks.used_blocks:
        raise RuntimeError("the prefill warm-up needs an empty KV pool")
    import torch
    report = WarmupReport(thread=threading.current_thread().name)
    passes = plan(chunk, max_model_len, blocks.num_blocks * blocks.block_size)
    if not passes:
        return report
    t0 = time.perf_counter()
    need = max(start + rows for start, rows in passes)
    seq = _Scratch(blocks.allocate(blocks.blocks_needed(need)))
    try:
        for start, rows in passes:
            seq.kv_len = start
            ids = [(7 * i + 3) % vocab_size for i in range(start, start + rows)]
            runner.run_window(seq, ids, all_logits=False)
            report.passes.append((start, rows))
        if runner.device.type == "cuda":
            torch.cuda.synchronize(runner.device)
    finally:
        blocks.reset()
    report.seconds = time.perf_counter() - t0
    return report
