"""Block allocation over the KV pool, plus finished sessions' blocks kept for reuse (LRU)."""
from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from engine.errors import AdmissionError


@dataclass
class SessionEntry:
    token_ids: list[int]     # tokens whose KV the blocks hold, in order
    blocks: list[int]


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int):
        self.num_blocks, self.block_size = num_blocks, block_size
        self._free: deque[int] = deque(range(num_blocks))
        self._sessions: OrderedDict[str, SessionEntry] = OrderedDict()

    def reset(self) -> None:
        """Every block free and no session kept: after a failed step, nothing in the pool is trusted."""
        self._free = deque(range(self.num_blocks))
        self._sessions.clear()

    def blocks_needed(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def check_fits(self, tokens: int) -> None:
        """AdmissionError when `tokens` could never fit, even in an empty pool."""
        need = self.blocks_needed(tokens)
        if need > self.num_blocks:
            raise AdmissionError(need, self.num_blocks, self.block_size, tokens)

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    @property
    def used_blocks(self) -> int:
        return self.num_blocks - len(self._free)

    def session_blocks(self) -> int:
        return sum(len(e.blocks) for e in self._sessions.values())

    def allocate(self, n: int) -> list[int] | None:
        """n free blocks, evicting least recently used sessions as needed; None if impossible now
        (then nothing is evicted)."""
        if len(self._free) + self.session_blocks() < n:
            return None
        while len(self._free) < n and self._sessions:
            _, entry = self._sessions.popitem(last=False)
            self._free.extend(entry.blocks)
        if len(self._free) < n:
            return None
        return [self._free.popleft() for _ in range(n)]

    def free(self, blocks: list[int]) -> None:
        self._free.extend(blocks)

    # sessions -----------------------------------------------------------------------------
    def sessions(self) -> list[str]:
        return list(self._sessions)

    def take_session(self, key: str) -> SessionEntry | None:
        """Remove and return a session's entry (its blocks now belong to the caller)."""
        return self._sessions.pop(key, None)

    def peek_session(self, key: str) -> SessionEntry | None:
        return self._sessions.get(key)

    def put_session(self, key: str, token_ids: list[int], blocks: list[int]) -> None:
        old = self._sessions.pop(key, None)
        if old is not None:
            self.free(old.blocks)
        self._sessions[key] = SessionEntry(list(token_ids), list(blocks))

    def drop_session(self, key: str) -> bool:
        entry = self._sessions.pop(key, None)
        if entry is None:
            return False
        self.free(entry.blocks)
        return True
