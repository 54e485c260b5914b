"""N-gram prompt-lookup drafting and greedy verification bookkeeping.

The drafter finds the most recent earlier occurrence of the sequence's last n tokens
(n from max_ngram down to min_ngram) and proposes the tokens that followed it.
"""
from __future__ import annotations

MAX_DRAFT = 15


def propose(tokens: list[int], k: int, max_ngram: int = 3, min_ngram: int = 1,
            window: int = 4096) -> list[int]:
    """Up to k draft tokens continuing `tokens`, or [] when no n-gram recurs in the last `window`."""
    if not 1 <= k <= MAX_DRAFT:
        raise ValueError(f"draft window must be 1..{MAX_DRAFT}, got {k}")
    n_tok = len(tokens)
    for n in range(min(max_ngram, n_tok - 1), min_ngram - 1, -1):
        tail = tokens[n_tok - n:]
        # Scan backwards: the most recent match best predicts the continuation.
        for start in range(n_tok - n - 1, max(-1, n_tok - window - 1), -1):
            if tokens[start:start + n] == tail:
                cont = tokens[start + n:start + n + k]
                if cont:
                    return cont
    return []


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
