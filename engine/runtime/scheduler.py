"""Continuous batching: a bounded pending queue, admission against the KV pool, one prefill
chunk per step interleaved with a decode step for every decoding sequence (or n-gram
speculation for greedy ones). Not thread-safe: the LLM calls it under its lock.

A failure in one sequence's own work (its prefill chunk, its sampling, its verification
window, its bookkeeping) fails that sequence only, with RequestFailed; the batched decode
forward pass is shared, so a failure there is still the LLM's to handle for all."""
from __future__ import annotations

import time
from collections import deque

import torch

from engine.errors import AdmissionError, PendingTimeout, QueueFull, RequestFailed
from engine.runtime import spec_ngram
from engine.runtime.block_manager import BlockManager
from engine.runtime.model_runner import ModelRunner
from engine.runtime.sampling import choose
from engine.runtime.sequence import Sequence, Status


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class Scheduler:
    def __init__(self, runner: ModelRunner, blocks: BlockManager, *, max_concurrency: int, max_pending: int,
                 pending_timeout_s: float, prefill_chunk: int, spec: str, draft_tokens: int,
                 eos_token_ids: set[int], max_model_len: int):
        self.runner, self.blocks = runner, blocks
        self.max_concurrency, self.max_pending = max_concurrency, max_pending
        self.pending_timeout_s, self.prefill_chunk = pending_timeout_s, prefill_chunk
        self.spec, self.k = spec, draft_tokens
        self.eos = set(eos_token_ids)
        self.max_model_len = max_model_len
        self.pending: deque[Sequence] = deque()
        self.active: list[Sequence] = []
        self.spec_counters = spec_ngram.SpecCounters(max(draft_tokens, 1))
        self._inflight = None            # model_runner.PendingTokens: a decode step not read yet

    # queueing ---------------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        tokens = seq.reserved_tokens
        limit = min(self.blocks.num_blocks, self.runner.max_blocks)
        if self.blocks.blocks_needed(tokens) > limit:
            raise AdmissionError(self.blocks.blocks_needed(tokens), limit, self.blocks.block_size, tokens)
        if len(self.pending) >= self.max_pending:
            raise QueueFull(self.max_pending)
        self.pending.append(seq)

    def has_work(self) -> bool:
        return bool(self.pending or self.active)

    def _expire(self) -> None:
        now = time.monotonic()
        for seq in list(self.pending):
            waited = now - seq.t_submit
            if seq.cancel_requested.is_set():
                self.pending.remove(seq)
                seq.finish("cancelled")
            elif waited > self.pending_timeout_s:
                self.pending.remove(seq)
                seq.finish(None, PendingTimeout(waited, self.pending_timeout_s))
        for seq in list(self.active):
            if seq.cancel_requested.is_set():
                self._release(seq, "cancelled")

    def _reserve(self, seq: Sequence) -> bool:
        """Give seq its blocks (reusing its session's cached prefix); False if not possible now."""
        need = self.blocks.blocks_needed(seq.reserved_tokens)
        entry = self.blocks.take_session(seq.session) if seq.session else None
        kept, reuse = [], 0
        if entry is not None:
            reuse = min(common_prefix(entry.token_ids, seq.tokens), seq.prompt_len - 1)
            keep_n = self.blocks.blocks_needed(reuse)
            kept = entry.blocks[:keep_n]
            self.blocks.free(entry.blocks[keep_n:])
            entry.token_ids = entry.token_ids[:min(len(entry.token_ids), keep_n * self.blocks.block_size)]
        fresh = self.blocks.allocate(need - len(kept))
        if fresh is None:
            if entry is not None and kept:
                self.blocks.put_session(seq.session, entry.token_ids, kept)
            return False
        seq.blocks = kept + fresh
        seq.kv_len = seq.cached_tokens = reuse
        return True

    def _admit(self) -> None:
        while self.pending and len(self.active) < self.max_concurrency:
            seq = self.pending[0]
            if not self._reserve(seq):
                break
            self.pending.popleft()
            seq.status, seq.t_admit = Status.PREFILL, time.monotonic()
            self.active.append(seq)

    # finishing ------------------------------------------------------------------------------------
    def _release(self, seq: Sequence, reason: str) -> None:
        if seq.session:
            keep = self.blocks.blocks_needed(seq.kv_len)
            self.blocks.put_session(seq.session, seq.tokens[:seq.kv_len], seq.blocks[:keep])
            self.blocks.free(seq.blocks[keep:])
        else:
            self.blocks.free(seq.blocks)
        seq.blocks = []
        self.active.remove(seq)
        self.spec_counters.merge(_counters(seq))
        seq.finish(reason)

    def _fail(self, seq: Sequence, where: str, err: Exception) -> None:
        """End one sequence with its error; its blocks go back (its session cache is dropped:
        its KV may be half written)."""
        if seq in self.active:
            self.active.remove(seq)
        self.blocks.free(seq.blocks)
        seq.blocks = []
        if seq.status is not Status.FINISHED:
            seq.finish(None, RequestFailed(seq.id, where, err))

    def _guard(self, seq: Sequence, where: str, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - one request's fault must not end the others
            self._fail(seq, where, e)

    def _choose(self, seq: Sequence, logits: torch.Tensor) -> tuple:
        return choose(logits, seq.params, seq.generator, seq.tokens[:seq.prompt_len], seq.output)

    def _emit(self, seq: Sequence, token: int, logprob=None) -> bool:
        """Append one token; finish the sequence if it stops here. True when it finished."""
        seq.emit(token, logprob)
        stops = set(seq.params.stop_token_ids or ())
        if not seq.params.ignore_eos:
            stops |= self.eos
        if token in stops:
            self._release(seq, "stop")
        elif seq.num_generated >= seq.params.max_new_tokens:
            self._release(seq, "length")
        else:
            return False
        return True

    # one step ---------------------------------------------------------------------------------------
    def step(self) -> None:
        self._expire()
        self._admit()
        self._prefill_chunk()
        self._decode()

    def _prefill_chunk(self) -> None:
        seq = next((s for s in self.active if s.status is Status.PREFILL), None)
        if seq is not None:
            self._guard(seq, "prefill", self._prefill_seq, seq)

    def _prefill_seq(self, seq: Sequence) -> None:
        n = min(self.prefill_chunk, len(seq.tokens) - seq.kv_len)
        logits = self.runner.run_window(seq, seq.tokens[seq.kv_len:seq.kv_len + n], all_logits=False)
        seq.kv_len += n
        if seq.kv_len == len(seq.tokens):
            seq.t_prefill_done = time.monotonic()
            seq.status = Status.DECODE
            self._emit(seq, *self._choose(seq, logits))

    def _draft(self, seq: Sequence) -> list[int]:
        if self.spec != "ngram" or not seq.params.plain:
            return []
        room = min(seq.params.max_new_tokens - seq.num_generated - 1, self.k)
        if room < 1:
            return []
        if seq.ngram is None:
            seq.ngram = spec_ngram.NgramIndex()
        return seq.ngram.propose(seq.tokens, room)

    def _decode(self) -> None:
        if self._inflight is not None and self._chain():
            return
        self._drain()
        if self.spec == "ngram":
            self._spec_step()
            return
        batch = [s for s in self.active if s.status is Status.DECODE]
        if not batch:
            return
        if self.spec == "none" and all(s.params.plain for s in batch):
            self.runner.decode(batch)       # its tokens are read next step, after the next launch
            self._inflight = self.runner.read_tokens(batch)
            return
        logits = self.runner.decode(batch)
        plain = [s.params.plain for s in batch]
        greedy = torch.argmax(logits, dim=-1).tolist() if any(plain) else None
        self.runner.check_step()
        for i, seq in enumerate(batch):
            self._guard(seq, "sampling", self._take, seq, greedy[i] if plain[i] else logits[i])

    def _take(self, seq: Sequence, row) -> None:
        """Accept one decoded token: a plain request's argmax, or chosen from its logits row."""
        seq.kv_len += 1
        if isinstance(row, int):
            self._emit(seq, row)
        else:
            self._emit(seq, *self._choose(seq, row))

    # Greedy decode, pipelined one step deep: step n+1 is queued on the GPU (fed step n's ids
    # from the device) before the host waits for step n's tokens, so the host's bookkeeping
    # overlaps the GPU instead of sitting between graph replays. Outputs are unchanged: the
    # same argmax, read one step later.
    def _chain(self) -> bool:
        """Launch the next step of the in-flight batch ahead, then read the in-flight one.
        False (nothing done) unless the batch is unchanged and none of it can end by length."""
        fl = self._inflight
        seqs = [s for s in self.active if s.status is Status.DECODE]
        if seqs != fl.seqs or any(s.num_generated + 1 >= s.params.max_new_tokens for s in seqs):
            return False
        self.runner.decode(seqs, ahead=True)
        self._inflight = self.runner.read_tokens(seqs)
        self._resolve(fl)      # a sequence that stops here wastes its row of the step just queued
        return True

    def _drain(self) -> None:
        fl, self._inflight = self._inflight, None
        if fl is not None:
            self._resolve(fl)

    def _resolve(self, fl) -> None:
        for seq, tok in zip(fl.seqs, fl.tolist()):
            if seq.status is Status.DECODE:          # not finished or cancelled since the launch
                self._guard(seq, "sampling", self._take, seq, tok)

    # Speculation: every decoding sequence's window ([last token] + its draft, or the last token
    # alone when nothing recurs) goes through ONE decode-path forward (a captured graph when the
    # rows fit a bucket) with one wait for the greedy ids of every row. A draft costs O(max_n)
    # dictionary look-ups on the host.
    def _spec_step(self) -> None:
        windows = []
        for seq in [s for s in self.active if s.status is Status.DECODE]:
            try:
                draft = self._draft(seq)
            except Exception as e:  # noqa: BLE001 - one request's fault must not end the others
                self._fail(seq, "draft", e)
                continue
            windows.append((seq, [seq.tokens[-1]] + draft))
        if not windows:
            return
        logits, greedy = self.runner.decode_windows(windows)
        row = 0
        for seq, toks in windows:
            if len(toks) > 1:
                self._guard(seq, "verify", self._accept, seq, toks[1:], greedy[row:row + len(toks)])
            elif seq.params.plain:
                self._guard(seq, "sampling", self._take, seq, greedy[row])
            else:
                self._guard(seq, "sampling", self._take, seq, logits[row])
            row += len(toks)

    def _accept(self, seq: Sequence, draft: list[int], target: list[int]) -> None:
        """Keep the longest prefix of draft that agrees with the model's own greedy ids."""
        a = spec_ngram.accept_greedy(draft, target)
        for i in range(len(draft)):
            seq.spec_attempted[i] += 1
            seq.spec_accepted[i] += i < a
        # KV of the fed token and the accepted drafts stays; later slots are simply overwritten.
        seq.kv_len += a + 1
        for tok in draft[:a] + [target[a]]:
            if self._emit(seq, tok):
                break

    def status(self) -> dict:
        return {"active": len(self.active), "pending": len(self.pending),
                "blocks_total": self.blocks.num_blocks, "blocks_used": self.blocks.used_blocks,
                "blocks_session": self.blocks.session_blocks(), "sessions": len(self.blocks.sessions()),
                "spec": self.spec_counters.as_dict()}


def _counters(seq: Sequence) -> spec_ngram.SpecCounters:
    c = spec_ngram.SpecCounters(len(seq.spec_attempted))
    c.attempted, c.accepted = list(seq.spec_attempted), list(seq.spec_accepted)
    return c
