"""CUDA graphs for decode: one captured graph per batch-size bucket over static input buffers.

Rows beyond the live batch are padding: they read and write only the pool's scratch block.
Per step the host sends one packed [3, bucket] int64 copy (token, position, slot); block
tables are re-sent only when the batch's membership changes (a sequence's blocks are all
reserved at admission, so they do not change while it decodes).

Each graph ends with the greedy argmax written into its own token-id input row, so a step
launched `ahead` (before the host has read the previous step's tokens) feeds those ids
straight back: the host then sends only positions and slots."""
from __future__ import annotations

import torch

from engine.model.transformer import AttnMeta
from engine.runtime.sampling import argmax_rows


class DecodeGraphs:
    def __init__(self, runner, batch_sizes=(1, 2, 4, 8, 16, 32)):
        self.runner = runner
        self.sizes = sorted(batch_sizes)
        dev, m, n = runner.device, runner.max_blocks, self.sizes[-1]
        self.scratch = runner.pool.scratch_block
        # Inputs [3, bucket] (ids, positions, slots), one buffer per bucket so that every copy
        # into one is a plain contiguous copy from pinned memory (truly asynchronous).
        self.inp: dict[int, torch.Tensor] = {}
        for b in self.sizes:
            self.inp[b] = torch.zeros((3, b), dtype=torch.int64, device=dev)
            self.inp[b][2].fill_(self.scratch * runner.bs)
        self.tables = torch.full((n, m), -1, dtype=torch.int32, device=dev)
        self.tables[:, 0] = self.scratch
        # Two staging buffers a bucket: with steps launched ahead, the previous step's
        # host-to-device copy may still be queued when the host packs the next one.
        self._host = {b: [torch.zeros((3, b), dtype=torch.int64).pin_memory() for _ in range(2)]
                      for b in self.sizes}
        self._flip = 0
        self._host_tables = torch.full((n, m), -1, dtype=torch.int32).pin_memory()
        self._tables_for = None
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.next_ids: torch.Tensor | None = None      # greedy ids of the last run, on the device
        # The batch-1 bucket's step with every layer in one persistent kernel, where it fits
        # (engine.runtime.persistent_decode); persistent_off says why not otherwise.
        self.persistent = None
        self.persistent_off: str | None = "no batch-1 bucket"
        if 1 in self.sizes:
            from engine.runtime import persistent_decode
            self.persistent_off = persistent_decode.unfit(runner.model, runner.pool, dev)
            if self.persistent_off is None:
                try:
                    self.persistent = persistent_decode.PersistentDecode(runner.model, runner.pool)
                except RuntimeError as e:        # out of memory for a stacked weight, say
                    self.persistent_off = f"{type(e).__name__}: {e}"
        self._capture_all()

    def fits(self, b: int) -> bool:
        return b <= self.sizes[-1]

    def failed_flag(self) -> torch.Tensor | None:
        """The persistent step's failure flag on the device (nonzero once a barrier timed out), or
        None when the batch-1 bucket runs the layered step."""
        return None if self.persistent is None else self.persistent.failed_flag()

    def _layered(self, b: int) -> torch.Tensor:
        inp = self.inp[b]
        ids, pos, slots = inp[0], inp[1], inp[2]
        lens = (pos + 1).to(torch.int32)          # computed inside the graph: one less copy
        meta = AttnMeta(slot_mapping=slots, decode=True, block_tables=self.tables[:b], seq_lens=lens)
        return self.runner.model(ids, pos, meta, self.runner.ops, self.runner.caches)

    def _forward(self, b: int) -> torch.Tensor:
        inp = self.inp[b]
        if b == 1 and self.persistent is not None:
            lens = (inp[1] + 1).to(torch.int32)
            logits = self.persistent.forward(inp[0], self.tables[:1], lens, inp[2])
        else:
            logits = self._layered(b)
        inp[0].copy_(argmax_rows(logits))    # the next step's ids, without the host
        return logits

    def _check_persistent(self) -> None:
        """Keep the persistent batch-1 step only if it fits the GPU and agrees with the layered step
        on the same (scratch) input; otherwise say why in persistent_off."""
        from engine.runtime.persistent_decode import self_check
        inp = self.inp[1]
        lens = (inp[1] + 1).to(torch.int32)
        why = self_check(self.persistent, self._layered(1), inp[0], self.tables[:1], lens, inp[2])
        if why is not None:
            self.persistent, self.persistent_off = None, why

    def _capture_all(self) -> None:
        pool = None
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for b in reversed(self.sizes):          # largest first, so smaller ones reuse its memory
                if b == 1 and self.persistent is not None:
                    self._check_persistent()
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

    def run(self, seqs, ahead: bool = False) -> torch.Tensor:
        """Logits [b, V]; the greedy ids are left in self.next_ids. ahead: see ModelRunner.decode."""
        ids, pos, slots, _ = self.runner.decode_inputs(seqs, ahead)
        return self.run_rows([(s.id, s.blocks, 1) for s in seqs], ids, pos, slots, ahead)

    def run_rows(self, groups, ids, pos, slots, ahead: bool = False) -> torch.Tensor:
        """Logits [rows, V] for rows given directly: groups lists (key, blocks, n_rows) in row
        order, n_rows consecutive rows sharing one block table (a verification window feeds one
        sequence's last token and its draft as rows at consecutive positions: the decode kernel,
        given each row's own length, attends causally). The greedy ids are left in self.next_ids."""
        b = len(ids)
        bucket = next(s for s in self.sizes if s >= b)
        pad = bucket - b
        host = self._host[bucket][self._flip]
        self._flip ^= 1
        host[:] = torch.tensor([ids + [0] * pad, pos + [0] * pad, slots + [self.scratch * self.runner.bs] * pad])
        inp = self.inp[bucket]
        if ahead:                                 # row 0 already holds the ids, on the GPU
            inp[1:].copy_(host[1:], non_blocking=True)
        else:
            inp.copy_(host, non_blocking=True)
        key = (bucket, tuple((k, n) for k, _, n in groups))
        if key != self._tables_for:
            ht = self._host_tables
            ht[:bucket].fill_(-1)
            r = 0
            for _, blocks, n in groups:
                ht[r:r + n, :len(blocks)] = torch.tensor(blocks, dtype=torch.int32)
                r += n
            ht[b:bucket, 0] = self.scratch
            self.tables[:bucket].copy_(ht[:bucket], non_blocking=True)
            self._tables_for = key
        self.graphs[bucket].replay()
        self.next_ids = inp[0, :b]
        return self.outputs[bucket][:b]
