"""Runs the model over the paged pool: a prefill chunk, a verification window, a decode batch."""
from __future__ import annotations

import torch

from engine.errors import DecodeKernelFailed
from engine.model.transformer import AttnMeta, Transformer
from engine.runtime.cpu_decode import CpuDecode
from engine.runtime.kv_pool import KVPool
from engine.runtime.sampling import argmax_rows
from engine.runtime.sequence import Sequence


class ModelRunner:
    def __init__(self, model: Transformer, pool: KVPool, ops, max_blocks_per_seq: int,
                 cuda_graphs: bool = False, graph_batch_sizes=(1, 2, 4, 8, 16, 32)):
        self.model, self.pool, self.ops = model, pool, ops
        self.device = pool.device
        self.caches = pool.layer_caches()
        self.bs = pool.block_size
        self.max_blocks = max_blocks_per_seq
        self._next_ids: torch.Tensor | None = None     # greedy ids of the last decode, on the device
        self._ring, self._ring_at = [torch.empty(0, dtype=torch.int64)] * 2, 0
        self._flags = [torch.zeros(1, dtype=torch.int32)] * 2     # pinned on CUDA (below)
        self.graphs = None
        self.graph_error: str | None = None
        # Decode steps on the CPU run as one flat loop (engine.runtime.cpu_decode), same logits.
        self.cpu_decode = CpuDecode(model) if CpuDecode.fits(model, ops, self.caches) else None
        if cuda_graphs and self.device.type == "cuda":
            from engine.runtime.cuda_graphs import DecodeGraphs
            try:
                self.graphs = DecodeGraphs(self, graph_batch_sizes)
            except RuntimeError as e:   # an op that cannot be captured: decode eagerly, say why
                self.graph_error = f"{type(e).__name__}: {e}"
                torch.cuda.synchronize()
            self._flags = [torch.zeros(1, dtype=torch.int32).pin_memory() for _ in range(2)]

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

    def decode_inputs(self, seqs: list[Sequence], ahead: bool = False):
        """Host lists for one decode step: each sequence feeds its last token at kv_len
        (ahead: the unread token of its previous step, at kv_len + 1; ids are then unused)."""
        ids = [s.tokens[-1] for s in seqs]
        pos = [s.kv_len + ahead for s in seqs]
        slots = [s.blocks[p // self.bs] * self.bs + p % self.bs for s, p in zip(seqs, pos)]
        lens = [p + 1 for p in pos]
        return ids, pos, slots, lens

    def decode(self, seqs: list[Sequence], ahead: bool = False) -> torch.Tensor:
        """Logits [B, V] for one new token of each sequence (their KV is written too); their
        greedy ids stay on the device for read_tokens. ahead=True: the same batch as the last
        call, whose tokens the host has not read yet: each sequence is fed that step's greedy
        id at position kv_len + 1, so the step can be queued before the last one finishes."""
        if self.graphs is not None and self.graphs.fits(len(seqs)):
            logits = self.graphs.run(seqs, ahead)
            self._next_ids = self.graphs.next_ids
            return logits
        ids, pos, slots, lens = self.decode_inputs(seqs, ahead)
        width = max(len(s.blocks) for s in seqs)
        table = [s.blocks + [-1] * (width - len(s.blocks)) for s in seqs]
        meta = AttnMeta(slot_mapping=self._t(slots, torch.int64), decode=True,
                        block_tables=self._t(table, torch.int32), seq_lens=self._t(lens, torch.int32))
        ids_t = self._next_ids if ahead else self._t(ids, torch.int64)
        logits = self._decode_forward(ids_t, self._t(pos, torch.int64), meta)
        self._next_ids = argmax_rows(logits)
        return logits

    def _decode_forward(self, ids: torch.Tensor, pos: torch.Tensor, meta: AttnMeta) -> torch.Tensor:
        if self.cpu_decode is not None:
            return self.cpu_decode.forward(ids, pos, meta, self.caches)
        return self.model(ids, pos, meta, self.ops, self.caches)

    def decode_windows(self, windows: list[tuple[Sequence, list[int]]]) -> tuple[torch.Tensor, list[int]]:
        """One decode-path forward over every sequence's window: its tokens (its last token,
        then any draft) at positions kv_len.. as consecutive rows sharing its block table;
        each row attends to the positions up to its own, so a window is causal. Returns
        logits [rows, V] and every row's greedy id on the host (the step's one wait).

        Verification then runs the very kernels, and under CUDA graphs the same captured
        kind of step, as plain decode, instead of an eager prefill pass per sequence."""
        ids, pos, slots, groups = [], [], [], []
        bs = self.bs
        for seq, toks in windows:
            start = seq.kv_len
            ids += toks
            pos += range(start, start + len(toks))
            slots += [seq.blocks[p // bs] * bs + p % bs for p in range(start, start + len(toks))]
            groups.append((seq.id, seq.blocks, len(toks)))
        if self.graphs is not None and self.graphs.fits(len(ids)):
            logits = self.graphs.run_rows(groups, ids, pos, slots)
            self._next_ids = self.graphs.next_ids
        else:
            width = max(len(s.blocks) for s, _ in windows)
            table = [s.blocks + [-1] * (width - len(s.blocks)) for s, toks in windows for _ in toks]
            meta = AttnMeta(slot_mapping=self._t(slots, torch.int64), decode=True,
                            block_tables=self._t(table, torch.int32),
                            seq_lens=self._t([p + 1 for p in pos], torch.int32))
            logits = self._decode_forward(self._t(ids, torch.int64), self._t(pos, torch.int64), meta)
            self._next_ids = argmax_rows(logits)
        ids = self._next_ids.tolist()
        self.check_step()
        return logits, ids

    def check_step(self) -> None:
        """Raise DecodeKernelFailed if the persistent decode step has failed (engine.runtime.
        persistent_decode); call after the host has waited for the step (a synchronising read)."""
        flag = self.graphs.failed_flag() if self.graphs is not None else None
        if flag is not None and int(flag.item()):
            raise DecodeKernelFailed()

    def read_tokens(self, seqs: list[Sequence]) -> "PendingTokens":
        """Start copying the last decode's greedy ids to the host without waiting for them.

        Two pinned buffers in turn: at most two launched steps are unread at once."""
        ids = self._next_ids
        if self.device.type != "cuda":            # a copy: ids may be a view the next step overwrites
            return PendingTokens(seqs, ids.clone(), None)
        slot = self._ring_at = (self._ring_at + 1) % 2
        if self._ring[slot].numel() < len(seqs):
            self._ring[slot] = torch.empty(len(seqs), dtype=torch.int64, pin_memory=True)
        host = self._ring[slot][:len(seqs)]
        host.copy_(ids, non_blocking=True)
        # The persistent step's failure flag rides along: a barrier time-out must not pass as tokens.
        flag = self.graphs.failed_flag() if self.graphs is not None else None
        if flag is not None:
            self._flags[slot].copy_(flag, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return PendingTokens(seqs, host, event, self._flags[slot] if flag is not None else None)


class PendingTokens:
    """The greedy token ids of a launched decode step; tolist() waits for that step only, and
    raises DecodeKernelFailed if the persistent decode kernel had failed by then."""

    def __init__(self, seqs: list[Sequence], host: torch.Tensor, event, failed: torch.Tensor | None = None):
        self.seqs, self.host, self.event, self.failed = seqs, host, event, failed

    def tolist(self) -> list[int]:
        if self.event is not None:
            self.event.synchronize()
        if self.failed is not None and int(self.failed[0]):
            raise DecodeKernelFailed()
        return self.host.tolist()
