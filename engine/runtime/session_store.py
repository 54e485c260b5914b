"""Session KV export / import / drop for LLM (the server's durable checkpoints build on this)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.errors import SessionError
from engine.runtime.cpu_threads import on_fresh_thread


@dataclass
class SessionState:
    """A session's cached tokens and their KV on the CPU: tensors "k", "v" [layers, n, kv_heads,
    head_dim] in the pool's dtype, plus "k_scale", "v_scale" [layers, n, kv_heads] for int8."""
    token_ids: list[int]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


class SessionStore:
    """Mixed into LLM, which provides _cond (its lock), blocks (BlockManager), pool (KVPool) and
    device. The pool's copies run on the caller's thread, except on the CPU (cpu_threads)."""

    def _on_pool(self, fn, *args):
        return on_fresh_thread(fn, *args) if self.device.type == "cpu" else fn(*args)

    def sessions(self) -> list[str]:
        with self._cond:
            return self.blocks.sessions()

    def export_session(self, key: str) -> SessionState:
        with self._cond:
            entry = self.blocks.peek_session(key)
            if entry is None:
                raise SessionError(f"no cached session under key {key!r}")
            tensors = self._on_pool(self.pool.read_tokens, entry.blocks, len(entry.token_ids))
            return SessionState(list(entry.token_ids), tensors)

    def import_session(self, key: str, state: SessionState) -> None:
        """Place a session's KV in the pool (replacing any under the same key)."""
        n = len(state.token_ids)
        if n < 1:
            raise SessionError(f"session {key!r}: state holds no tokens")
        k = state.tensors.get("k")
        if k is None or k.dim() != 4 or k.shape[1] != n:
            raise SessionError(f"session {key!r}: tensor 'k' must be [layers, {n}, kv_heads, head_dim], "
                               f"got {None if k is None else tuple(k.shape)}")
        bad = [t for t in state.token_ids if not 0 <= int(t) < self.config.vocab_size]
        if bad:
            raise SessionError(f"session {key!r}: token ids outside the vocabulary: {bad[:5]}")
        with self._cond:
            self.blocks.drop_session(key)
            need = self.blocks.blocks_needed(n)
            blocks = self.blocks.allocate(need)
            if blocks is None:
                raise SessionError(f"session {key!r}: {need} KV blocks needed, "
                                   f"{self.blocks.free_blocks} free and no idle session to evict")
            try:
                self._on_pool(self.pool.write_tokens, blocks, state.tensors)
            except Exception as e:
                self.blocks.free(blocks)
                raise SessionError(f"session {key!r}: {e}") from None
            self.blocks.put_session(key, [int(t) for t in state.token_ids], blocks)

    def drop_session(self, key: str) -> bool:
        with self._cond:
            return self.blocks.drop_session(key)
