"""N-gram prompt-lookup drafting and greedy verification bookkeeping.

The drafter finds the most recent earlier occurrence of the sequence's last n tokens
(n from max_n down to min_n) and proposes the tokens that followed it.
"""
from __future__ import annotations

MAX_DRAFT = 15


class NgramIndex:
    """Most recent end position of every n-gram (n = min_n..max_n) of a growing token list,
    so that a draft costs O(max_n) per step instead of a scan over the history."""

    def __init__(self, max_n: int = 3, min_n: int = 1):
        self.max_n, self.min_n = max_n, min_n
        self._last: dict[tuple, int] = {}
        self._indexed = 0            # n-grams ending at positions <= this are in _last

    def propose(self, tokens: list[int], k: int) -> list[int]:
        """Up to k tokens that followed the most recent earlier occurrence of the longest
        recurring tail n-gram; [] when none recurs."""
        if not 1 <= k <= MAX_DRAFT:
            raise ValueError(f"draft window must be 1..{MAX_DRAFT}, got {k}")
        end = len(tokens)
        # Index n-grams ending before the tail's end: the tail itself must not match itself.
        for e in range(max(self._indexed + 1, 1), end):
            for n in range(self.min_n, min(self.max_n, e) + 1):
                self._last[tuple(tokens[e - n:e])] = e
        self._indexed = max(self._indexed, end - 1)
        for n in range(min(self.max_n, end), self.min_n - 1, -1):
            e = self._last.get(tuple(tokens[end - n:]))
            if e is not None:
                return tokens[e:e + k]
        return []


def propose(tokens: list[int], k: int, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """One-off draft (a fresh index): see NgramIndex.propose."""
    return NgramIndex(max_ngram, min_ngram).propose(tokens, k)


def accept_greedy(draft: list[int], target: list[int]) -> int:
    """How many draft tokens match the model's own greedy choices (target has len(draft)+1)."""
    a = 0
    while a < len(draft) and draft[a] == target[a]:
        a += 1
    return a


class SpecCounters:
    """Per draft position: tokens attempted and accepted."""

    def __init__(self, k: int):
        self.attempted = [0] * k
        self.accepted = [0] * k

    def record(self, drafted: int, accepted: int) -> None:
        for i in range(drafted):
            self.attempted[i] += 1
        for i in range(accepted):
            self.accepted[i] += 1

    def merge(self, other: "SpecCounters") -> None:
        for i in range(min(len(self.attempted), len(other.attempted))):
            self.attempted[i] += other.attempted[i]
            self.accepted[i] += other.accepted[i]

    def as_dict(self) -> dict:
        return {"attempted": list(self.attempted), "accepted": list(self.accepted)}
