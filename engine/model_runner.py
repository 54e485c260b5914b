"""Runs the model over the paged pool: a prefill chunk, a verification window, a decode batch."""
from __future__ import annotations

import torch

from engine.kv_pool import KVPool
from engine.model import AttnMeta, Transformer
from engine.sequence import Sequence


class ModelRunner:
    def __init__(self, model: Transformer, pool: KVPool, ops, max_blocks_per_seq: int,
                 cuda_graphs: bool = False, graph_batch_sizes=(1, 2, 4, 8, 16, 32)):
        self.model, self.pool, self.ops = model, pool, ops
        self.device = pool.device
        self.caches = pool.layer_caches()
        self.bs = pool.block_size
        self.max_blocks = max_blocks_per_seq
        self.graphs = None
        self.graph_error: str | None = None
        if cuda_graphs and self.device.type == "cuda":
            from engine.cuda_graphs import DecodeGraphs
            try:
                self.graphs = DecodeGraphs(self, graph_batch_sizes)
            except RuntimeError as e:   # an op that cannot be captured: decode eagerly, say why
                self.graph_error = f"{type(e).__name__}: {e}"
                torch.cuda.synchronize()

    def _t(self, data, dtype) -> torch.Tensor:
        return torch.tensor(data, dtype=dtype).to(self.device, non_blocking=True)

    def _slots(self, blocks: list[int], start: int, n: int) -> list[int]:
        bs = self.bs
        return [blocks[p // bs] * bs + p % bs for p in range(start, start + n)]

    def run_window(self, seq: Sequence, tokens: list[int], all_logits: bool) -> torch.Tensor:
        """Feed `tokens` at positions seq.kv_len.. through the prefill path; advances nothing.

        Returns float32 logits for the last token [V], or for every token [n, V]."""
        start, n = seq.kv_len, len(tokens)
        meta = AttnMeta(slot_mapping=self._t(self._slots(seq.blocks, start, n), torch.int64), decode=False,
                        block_table=self._t(seq.blocks, torch.int32), start_pos=start)
        ids = self._t(tokens, torch.int64)
        pos = torch.arange(start, start + n, device=self.device)
        rows = None if all_logits else torch.tensor([n - 1], device=self.device)
        logits = self.model(ids, pos, meta, self.ops, self.caches, logit_rows=rows)
        return logits if all_logits else logits[0]

    def decode_inputs(self, seqs: list[Sequence]):
        """Host lists for one decode step: each sequence feeds its last token at kv_len."""
        ids = [s.tokens[-1] for s in seqs]
        pos = [s.kv_len for s in seqs]
        slots = [s.blocks[p // self.bs] * self.bs + p % self.bs for s, p in zip(seqs, pos)]
        lens = [p + 1 for p in pos]
        return ids, pos, slots, lens

    def decode(self, seqs: list[Sequence]) -> torch.Tensor:
        """Logits [B, V] for one new token of each sequence (their KV is written too)."""
        if self.graphs is not None and self.graphs.fits(len(seqs)):
            return self.graphs.run(seqs)
        ids, pos, slots, lens = self.decode_inputs(seqs)
        width = max(len(s.blocks) for s in seqs)
        table = [s.blocks + [-1] * (width - len(s.blocks)) for s in seqs]
        meta = AttnMeta(slot_mapping=self._t(slots, torch.int64), decode=True,
                        block_tables=self._t(table, torch.int32), seq_lens=self._t(lens, torch.int32))
        return self.model(self._t(ids, torch.int64), self._t(pos, torch.int64), meta, self.ops, self.caches)
