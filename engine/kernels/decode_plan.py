"""Where each sequence's KV lies for a CPU decode step, worked out once per step, not per layer.

A decode step calls the attention op once per layer with the same block tables and lengths.
Reading them (lengths to the host, the first block, whether the blocks are consecutive) is a
handful of tiny tensor ops, as many as the attention itself costs on the CPU at short context.
The plan depends only on the values of block_tables, seq_lens and the block size, so it is kept
per thread and reused while those values are equal (two torch.equal calls decide that), which
stays correct when a caller reuses or edits the same tensors in place.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Span:
    """One sequence's first n cached tokens: rows [row0, row0 + n) of the flattened cache when
    its blocks are consecutive (a view), else `blocks` to gather."""
    n: int
    row0: int | None
    blocks: torch.Tensor | None


@dataclass(frozen=True)
class PaddedBatch:
    """The live sequences' KV as one padded batch: `blocks` [L, nblk] to gather (padding blocks
    clamped to 0), `mask` [L, 1, 1, n_max] True on real tokens, `rows` the live sequences' rows
    of the step (None when every row is live)."""
    rows: torch.Tensor | None
    blocks: torch.Tensor
    mask: torch.Tensor
    n_max: int


@dataclass(frozen=True)
class DecodePlan:
    lens: list[int]
    spans: list[Span | None]      # None: seq_len 0, the sequence gets zeros
    # Derived tensors built on first use and shared by the step's layers (padded_batch).
    derived: dict = field(default_factory=dict, compare=False, repr=False)


_memo = threading.local()


def _build(block_tables: torch.Tensor, seq_lens: torch.Tensor, bs: int) -> DecodePlan:
    lens = seq_lens.tolist()
    rows = block_tables.tolist()
    spans: list[Span | None] = []
    for row, n in zip(rows, lens):
        if n <= 0:
            spans.append(None)
            continue
        ids = [max(b, 0) for b in row[: -(-n // bs)]]
        if ids == list(range(ids[0], ids[0] + len(ids))):
            spans.append(Span(n, ids[0] * bs, None))
        else:
            spans.append(Span(n, None, torch.tensor(ids, dtype=torch.long)))
    return DecodePlan(lens, spans)


def decode_plan(block_tables: torch.Tensor, seq_lens: torch.Tensor, bs: int) -> DecodePlan:
    """The plan for these values; the last one built on this thread when they are equal."""
    last = getattr(_memo, "last", None)
    if (last is not None and last[2] == bs and last[0].shape == block_tables.shape
            and last[1].shape == seq_lens.shape and torch.equal(last[0], block_tables)
            and torch.equal(last[1], seq_lens)):
        return last[3]
    plan = _build(block_tables, seq_lens, bs)
    # Copies, so that later in-place edits of the caller's tensors cannot match stale values.
    _memo.last = (block_tables.clone(), seq_lens.clone(), bs, plan)
    return plan


def span_heads(cache: torch.Tensor, scale: torch.Tensor | None, span: Span) -> torch.Tensor:
    """float32 [1, num_kv_heads, n, head_dim] of one sequence's KV, as attention takes it: a
    strided view of a contiguous float32 cache in place (one op), else its blocks gathered."""
    _, bs, hkv, d = cache.shape
    if span.row0 is not None and scale is None and cache.dtype == torch.float32 and cache.is_contiguous():
        return cache.as_strided((1, hkv, span.n, d), (hkv * span.n * d, d, hkv * d, 1),
                                cache.storage_offset() + span.row0 * hkv * d)
    blocks = span.blocks
    if blocks is None:
        first = span.row0 // bs
        blocks = torch.arange(first, first + -(-span.n // bs))
    x = cache[blocks].float()
    if scale is not None:
        x = x * scale[blocks].unsqueeze(-1)
    return x.flatten(0, 1)[: span.n].transpose(0, 1)[None]


def padded_batch(plan: DecodePlan, block_tables: torch.Tensor, bs: int) -> PaddedBatch:
    """plan's live sequences as one padded batch, built once a step (the plan's first layer)."""
    pb = plan.derived.get("padded")
    if pb is None:
        live = [b for b, n in enumerate(plan.lens) if n > 0]
        n_max = max(plan.lens)
        rows = torch.tensor(live)
        blocks = block_tables[rows, : -(-n_max // bs)].long().clamp(min=0)
        mask = torch.arange(n_max)[None, :] < torch.tensor([plan.lens[b] for b in live])[:, None]
        pb = PaddedBatch(None if len(live) == len(plan.lens) else rows, blocks, mask[:, None, None, :], n_max)
        plan.derived["padded"] = pb
    return pb
