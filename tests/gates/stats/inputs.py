"""Builders of judge inputs shared by the gates.stats tests."""

from __future__ import annotations

import hashlib

LEGS = ("A1", "B1", "B2", "A2")
CANDIDATE = {"id": "a" * 64, "commit": "b" * 40, "tree": "c" * 40}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def abba_case(case_id: str, rates: dict[str, float], *, weight: float = 1.0, tokens: int = 100,
              digests: dict[str, str] | None = None) -> dict:
    """A case whose legs decode `tokens` tokens at the given rates (tokens / seconds)."""
    digests = digests or {leg: sha(f"{case_id}-out") for leg in LEGS}
    return {"id": case_id, "weight": weight, "context_depth": 1024,
            "legs": {leg: {"tokens": tokens, "seconds": tokens / rate, "output_sha256": digests[leg]}
                     for leg, rate in rates.items()}}


def even(a: float, b: float) -> dict[str, float]:
    return {"A1": a, "B1": b, "B2": b, "A2": a}
