"""CUDA graphs for decode: one captured graph per batch-size bucket over static input buffers.

Rows beyond the live batch are padding: they read and write only the pool's scratch block.
Per step the host sends one packed [3, bucket] int64 copy (token, position, slot); block
tables are re-sent only when the batch's membership changes (a sequence's blocks are all
reserved at admission, so they do not change while it decodes)."""
from __future__ import annotations

import torch

from engine.model import AttnMeta


class DecodeGraphs:
    def __init__(self, runner, batch_sizes=(1, 2, 4, 8, 16, 32)):
        self.runner = runner
        self.sizes = sorted(batch_sizes)
        dev, m, n = runner.device, runner.max_blocks, self.sizes[-1]
        self.scratch = runner.pool.scratch_block
        self.inp = torch.zeros((3, n), dtype=torch.int64, device=dev)       # ids, positions, slots
        self.inp[2].fill_(self.scratch * runner.bs)
        self.tables = torch.full((n, m), -1, dtype=torch.int32, device=dev)
        self.tables[:, 0] = self.scratch
        self._host = torch.zeros((3, n), dtype=torch.int64).pin_memory()
        self._host_tables = torch.full((n, m), -1, dtype=torch.int32).pin_memory()
        self._tables_for = None
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self._capture_all()

    def fits(self, b: int) -> bool:
        return b <= self.sizes[-1]

    def _forward(self, b: int) -> torch.Tensor:
        ids, pos, slots = self.inp[0, :b], self.inp[1, :b], self.inp[2, :b]
        lens = (pos + 1).to(torch.int32)          # computed inside the graph: one less copy
        meta = AttnMeta(slot_mapping=slots, decode=True, block_tables=self.tables[:b], seq_lens=lens)
        return self.runner.model(ids, pos, meta, self.runner.ops, self.runner.caches)

    def _capture_all(self) -> None:
        pool = None
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for b in reversed(self.sizes):          # largest first, so smaller ones reuse its memory
                for _ in range(2):                  # compile kernels and settle allocations first
                    self._forward(b)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool, stream=stream):
                    self.outputs[b] = self._forward(b)
                pool = g.pool()
                self.graphs[b] = g
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()

    def run(self, seqs) -> torch.Tensor:
        b = len(seqs)
        bucket = next(s for s in self.sizes if s >= b)
        ids, pos, slots, _ = self.runner.decode_inputs(seqs)
        pad = bucket - b
        self._host[:, :bucket] = torch.tensor([ids + [0] * pad, pos + [0] * pad,
                                               slots + [self.scratch * self.runner.bs] * pad])
        self.inp[:, :bucket].copy_(self._host[:, :bucket], non_blocking=True)
        key = (bucket, tuple(s.id for s in seqs))
        if key != self._tables_for:
            ht = self._host_tables
            ht[:bucket].fill_(-1)
            for i, s in enumerate(seqs):
                ht[i, :len(s.blocks)] = torch.tensor(s.blocks, dtype=torch.int32)
            ht[b:bucket, 0] = self.scratch
            self.tables[:bucket].copy_(ht[:bucket], non_blocking=True)
            self._tables_for = key
        self.graphs[bucket].replay()
        return self.outputs[bucket][:b]
