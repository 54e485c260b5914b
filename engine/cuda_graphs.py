"""CUDA graphs for decode: one captured graph per batch-size bucket, static input buffers.

Rows beyond the live batch are padding: they read and write only the pool's scratch block.
"""
from __future__ import annotations

import torch

from engine.model import AttnMeta


class DecodeGraphs:
    def __init__(self, runner, batch_sizes=(1, 2, 4, 8, 16, 32)):
        self.runner = runner
        self.sizes = sorted(batch_sizes)
        dev, m, n = runner.device, runner.max_blocks, self.sizes[-1]
        self.ids = torch.zeros(n, dtype=torch.int64, device=dev)
        self.pos = torch.zeros(n, dtype=torch.int64, device=dev)
        self.slots = torch.zeros(n, dtype=torch.int64, device=dev)
        self.tables = torch.full((n, m), -1, dtype=torch.int32, device=dev)
        self.lens = torch.ones(n, dtype=torch.int32, device=dev)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self._host = torch.empty((4, n), dtype=torch.int64).pin_memory()
        self._host_tables = torch.empty((n, m), dtype=torch.int32).pin_memory()
        self._capture_all()

    def fits(self, b: int) -> bool:
        return b <= self.sizes[-1]

    def _pad(self):
        scratch = self.runner.pool.scratch_block
        self.ids.zero_()
        self.pos.zero_()
        self.slots.fill_(scratch * self.runner.bs)
        self.tables.fill_(-1)
        self.tables[:, 0] = scratch
        self.lens.fill_(1)

    def _forward(self, b: int) -> torch.Tensor:
        meta = AttnMeta(slot_mapping=self.slots[:b], decode=True, block_tables=self.tables[:b], seq_lens=self.lens[:b])
        return self.runner.model(self.ids[:b], self.pos[:b], meta, self.runner.ops, self.runner.caches)

    def _capture_all(self) -> None:
        self._pad()
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
        ids, pos, slots, lens = self.runner.decode_inputs(seqs)
        self._pad()
        h = self._host
        h[0, :b] = torch.tensor(ids)
        h[1, :b] = torch.tensor(pos)
        h[2, :b] = torch.tensor(slots)
        h[3, :b] = torch.tensor(lens)
        self.ids[:b].copy_(h[0, :b], non_blocking=True)
        self.pos[:b].copy_(h[1, :b], non_blocking=True)
        self.slots[:b].copy_(h[2, :b], non_blocking=True)
        self.lens[:b].copy_(h[3, :b], non_blocking=True)
        ht = self._host_tables
        ht[:b].fill_(-1)
        for i, s in enumerate(seqs):
            ht[i, :len(s.blocks)] = torch.tensor(s.blocks, dtype=torch.int32)
        self.tables[:b].copy_(ht[:b], non_blocking=True)
        self.graphs[bucket].replay()
        return self.outputs[bucket][:b]

